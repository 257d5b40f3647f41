"""NumPy kernels of the model layers (conv/pool N-d, normalization, attention, FFT,
selective scan). Their names are listed in :data:`torchlean.kernels.api.KERNELS_NN`."""

from __future__ import annotations
