"""DDP communication hooks (``DistributedDataParallel.register_comm_hook``): :mod:`.default_hooks`."""

from . import default_hooks  # noqa: F401
