"""``python -m torchlean`` runs the ``torchlean`` command (see :mod:`torchlean.cli`)."""

import sys

from .cli import main

sys.exit(main())
