"""torch.distributed.algorithms under torchlean: the DDP communication hooks (:mod:`.ddp_comm_hooks`)."""

from . import ddp_comm_hooks  # noqa: F401
