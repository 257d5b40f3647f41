"""torch.utils.model_zoo: :func:`load_url`, torch's older name for
:func:`torchlean.hub.load_state_dict_from_url`.

    >>> import torchlean.utils.model_zoo as model_zoo
    >>> model_zoo.load_url.__name__
    'load_state_dict_from_url'
"""

from ..hub import load_state_dict_from_url

load_url = load_state_dict_from_url

__all__ = ["load_url"]
