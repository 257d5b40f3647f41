"""``torch.nn.modules.rnn``: the same classes as ``torchlean.nn`` (for programs that import them from here)."""

from __future__ import annotations

from ..recurrent import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNBase, RNNCell, RNNCellBase  # noqa: F401

__all__ = ["GRU", "GRUCell", "LSTM", "LSTMCell", "RNN", "RNNBase", "RNNCell", "RNNCellBase"]
