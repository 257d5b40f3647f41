"""A small vision transformer."""

from __future__ import annotations

from .. import nn
from ..errors import ShapeError
from ..nn import init
from ..nn.layers import LayerNorm
from ..nn.pooling import Conv2d
from ..nn.parameter import Parameter
from ..ops import cat, zeros


class TransformerBlock(nn.Module):
    """Pre-norm block: ``x + attn(ln_1(x))``, then ``x + mlp(ln_2(x))`` (MLP with GELU)."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: int = 4):
        super().__init__()
        self.norm1 = LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, num_heads, batch_first=True)
        self.norm2 = LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_ratio * dim), nn.GELU(), nn.Linear(mlp_ratio * dim, dim))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class ViT(nn.Module):
    """Vision transformer: conv patch embedding, class token, learned positions, pre-norm blocks, head.

    ``(N, C, H, W)`` images are cut into ``patch_size`` squares by a strided
    convolution (``patch_embed``), a learned ``cls_token`` is prepended, learned
    ``pos_embed`` added, ``depth`` pre-norm transformer blocks with
    ``nn.MultiheadAttention`` applied, and the final-normed class token classified.

        >>> import torchlean as tl
        >>> _ = tl.manual_seed(0)
        >>> ViT()(tl.zeros(2, 1, 8, 8)).shape
        torchlean.Size([2, 10])
    """

    def __init__(self, image_size: int = 8, patch_size: int = 2, in_channels: int = 1, num_classes: int = 10,
                 dim: int = 64, depth: int = 2, num_heads: int = 4, mlp_ratio: int = 2):
        super().__init__()
        if image_size % patch_size:
            raise ShapeError(f"ViT: image_size {image_size} is not a multiple of patch_size {patch_size}")
        self.config = {"image_size": int(image_size), "patch_size": int(patch_size),
                       "in_channels": int(in_channels), "num_classes": int(num_classes), "dim": int(dim),
                       "depth": int(depth), "num_heads": int(num_heads), "mlp_ratio": int(mlp_ratio)}
        n_patches = (image_size // patch_size) ** 2
        self.patch_embed = Conv2d(in_channels, dim, patch_size, stride=patch_size)
        self.cls_token = Parameter(zeros(1, 1, dim))
        self.pos_embed = Parameter(zeros(1, n_patches + 1, dim))
        init.normal_(self.cls_token, std=0.02)
        init.normal_(self.pos_embed, std=0.02)
        self.blocks = nn.ModuleList([TransformerBlock(dim, num_heads, mlp_ratio) for _ in range(depth)])
        self.norm = LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        n = x.shape[0]
        p = self.patch_embed(x).flatten(2).transpose(1, 2)            # (N, patches, dim)
        cls = self.cls_token.expand(n, 1, self.cls_token.shape[-1])
        x = cat([cls, p], dim=1) + self.pos_embed
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x[:, 0]))
