from commbench.collectives.base import Collective, NativeCall, WholeBuffer
from commbench.collectives.patterns import tile


class SendRecv(WholeBuffer, Collective):
    """Every rank sends its buffer to rank r+1 and receives rank r-1's, at once (a ring of pairs: the
    link itself, pipeline parallelism's traffic). size = the buffer; busbw = algbw (nccl-tests)."""

    name = "send_recv"
    reduces = False
    native = {"mpi": NativeCall("Sendrecv", "sendrecv"), "torch": NativeCall("batch_isend_irecv", "ring_pair",
                                                                              in_place=False, no_in_place="takes separate input and output tensors")}
    nccl_tests_name = "sendrecv"
    description = "each rank's buffer to rank r+1, rank r-1's received; size: the buffer; busbw = algbw"

    def expected(self, pattern, rank, counts, start, length):
        return tile(pattern.values((rank - 1) % pattern.world), start, length)
