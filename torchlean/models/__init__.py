"""Example models: plain ``nn.Module`` s with PyTorch's parameter names.

- :class:`MLP` — a multilayer perceptron;
- :class:`CNN` — a small convolutional net for 8x8 digits;
- :class:`ResNet` — basic residual blocks with batch norm;
- :class:`ViT` — a small vision transformer;
- :class:`FNO1d` — a 1-D Fourier neural operator;
- :class:`MambaLM` (blocks :class:`MambaBlock`) — a selective state-space language model;
- :class:`GPT` — a decoder-only transformer language model.

Each model keeps its constructor arguments in ``model.config`` (checkpoints record it).
``torchlean train MODEL`` trains them on the bundled data sets (see torchlean/train/).
"""

from .cnn import CNN, BasicBlock, ResNet
from .fno import FNO1d
from .gpt import GPT
from .mamba import MambaBlock, MambaLM
from .mlp import MLP
from .vit import TransformerBlock, ViT

__all__ = ["MLP", "CNN", "BasicBlock", "ResNet", "ViT", "TransformerBlock", "FNO1d", "GPT", "MambaBlock",
           "MambaLM"]
