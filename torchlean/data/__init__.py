"""Data without downloads, and the loaders.

- :class:`Dataset`, :class:`TensorDataset`, :class:`Subset`, :func:`random_split`,
  :class:`DataLoader` (counter-based, reproducible shuffling);
- :func:`load_digits`: the 8x8 handwritten digits (UCI), shipped with the package;
- :func:`burgers_dataset`: Burgers' equation pairs from a pseudo-spectral solver;
- :func:`text_corpus`: a character corpus from the Python standard library's sources,
  with :class:`CharTokenizer`, :class:`CharDataset` and :func:`unigram_baseline`.

See docs/data.md.
"""

from .burgers import burgers_dataset, burgers_solve, gaussian_random_field
from .cache import cache_root
from .digits import as_images, load_digits
from .loader import DataLoader, Dataset, Subset, TensorDataset, default_collate, permutation, random_split
from .text import (CharDataset, CharTokenizer, char_lm_batches, text_corpus, train_val_split,
                   unigram_baseline)

__all__ = [
    "Dataset", "TensorDataset", "Subset", "DataLoader", "random_split", "default_collate", "permutation",
    "load_digits", "as_images",
    "burgers_dataset", "burgers_solve", "gaussian_random_field", "cache_root",
    "text_corpus", "CharTokenizer", "CharDataset", "char_lm_batches", "train_val_split", "unigram_baseline",
]
