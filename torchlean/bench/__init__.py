"""The benchmark suites of ``torchlean bench SUITE`` (one ``bench_SUITE.py`` script each).

Each suite times torchlean against PyTorch in the same process (PyTorch only as the reference,
when installed) and prints ratios; ``torchlean bench`` lists them. They ship with the package,
so an installed torchlean runs them too; ``--save`` writes tables under ``./benchmarks/results/``.
"""
