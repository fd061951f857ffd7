"""What a person reads on a terminal: terminal.py (the console and text from outside made safe to show),
tables.py (a sweep's lines in nccl-tests' layout), console.py (a run's, ab's and check's progress and
tables). Below the readers (analysis/ shows its verdicts through terminal.py); it computes nothing it shows."""
