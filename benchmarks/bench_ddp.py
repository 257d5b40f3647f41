"""The data-parallel benchmark (torchlean/bench/bench_ddp.py): ``python benchmarks/bench_ddp.py [--gpus 1,2]``,
the same as ``torchlean bench ddp``."""

import sys

from torchlean.bench.bench_ddp import main

if __name__ == "__main__":
    sys.exit(main())
