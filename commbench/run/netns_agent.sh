#!/bin/sh
# mpirun's launch agent in an emulated cluster (commbench/run/emulate.py), in place of ssh: called as
# "HOST-nI COMMAND", it runs COMMAND (a shell command line, as ssh would) in emulated node I's network
# namespace ($COMMBENCH_NETNS_PREFIX followed by I) under a host name of its own, HOST-nI, so that Open
# MPI sees one node per namespace: its TCP transport between them, shared memory inside each.
host=$1
shift
exec ip netns exec "${COMMBENCH_NETNS_PREFIX:?}${host##*-n}" unshare --uts sh -c 'hostname "$0" && eval "$1"' "$host" "$*"
