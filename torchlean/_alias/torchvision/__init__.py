"""Answers this import with torchlean's module (see :mod:`torchlean._alias`)."""

from torchlean.runner import alias_in_child

alias_in_child(__name__)
