"""The scale benchmark (torchlean/bench/bench_scale.py): ``python benchmarks/bench_scale.py [--models ...]``,
the same as ``torchlean bench scale``."""

import sys

from torchlean.bench.bench_scale import main

if __name__ == "__main__":
    sys.exit(main())
