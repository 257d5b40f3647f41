"""Stand-ins for ``torch`` and ``torchvision`` that only processes started by a ``torchlean run`` program
find: :func:`torchlean.runner.run_script` puts this folder on ``sys.path``, which multiprocessing's
spawn hands to each child; the child's first ``import torch`` (or ``torchvision``) runs the stand-in,
which installs the runner's import hook and answers with torchlean's module, as in the parent."""
