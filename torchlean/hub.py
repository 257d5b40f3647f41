"""torch.hub under torchlean: checkpoints by URL, and models from a local ``hubconf.py``.

:func:`load_state_dict_from_url` downloads a checkpoint once into ``get_dir()/checkpoints`` (urllib:
``https://``, ``file://``, ...), checks torch's hash prefix (``name-<sha256 prefix>.ext``) when
``check_hash``, and reads it with :func:`torchlean.load` (tensors and plain containers only).
:func:`load` / :func:`list` / :func:`help` import a local directory's ``hubconf.py``
(``source="local"``); GitHub repositories are not downloaded, since using one means running code
fetched from the network.

    >>> import torchlean as tl
    >>> import os
    >>> tl.hub.get_dir().endswith(os.path.join("torch", "hub")) or "TORCH_HOME" in os.environ
    True
"""

from __future__ import annotations

import errno
import hashlib
import importlib.util
import os
import re
import shutil
import sys
import tempfile
import uuid
import warnings
import zipfile
from contextlib import contextmanager
from urllib.parse import urlparse
from urllib.request import Request, urlopen

from .errors import TorchLeanError
from .serialization import load as _load

__all__ = ["download_url_to_file", "get_dir", "help", "list", "load", "load_state_dict_from_url", "set_dir"]

HASH_REGEX = re.compile(r"-([a-f0-9]*)\.")
ENV_TORCH_HOME = "TORCH_HOME"
ENV_XDG_CACHE_HOME = "XDG_CACHE_HOME"
DEFAULT_CACHE_DIR = "~/.cache"
VAR_DEPENDENCY = "dependencies"
MODULE_HUBCONF = "hubconf.py"
READ_DATA_CHUNK = 128 * 1024

_hub_dir: str | None = None


class HubError(TorchLeanError, RuntimeError):
    """A hub download, hash check or hubconf entrypoint failed."""


def _get_torch_home() -> str:
    return os.path.expanduser(os.getenv(ENV_TORCH_HOME, os.path.join(os.getenv(ENV_XDG_CACHE_HOME,
                                                                                 DEFAULT_CACHE_DIR), "torch")))


def get_dir() -> str:
    """The hub cache directory: :func:`set_dir`'s, else ``$TORCH_HOME/hub`` (``$TORCH_HOME``
    defaults to ``$XDG_CACHE_HOME/torch``, ``$XDG_CACHE_HOME`` to ``~/.cache``), as in torch."""
    if os.getenv("TORCH_HUB"):
        warnings.warn("TORCH_HUB is deprecated, please use env TORCH_HOME instead", stacklevel=2)
    if _hub_dir is not None:
        return _hub_dir
    return os.path.join(_get_torch_home(), "hub")


def set_dir(d) -> None:
    """Use ``d`` (``~`` expanded) as the hub cache directory."""
    global _hub_dir
    _hub_dir = os.path.expanduser(d)


def download_url_to_file(url: str, dst: str, hash_prefix: str | None = None, progress: bool = True) -> None:
    """Download ``url`` to ``dst`` (through a temporary ``.partial`` file, moved into place when
    complete); with ``hash_prefix``, the file's SHA-256 hex digest must start with it. ``progress``
    prints the byte count to stderr (torch draws a tqdm bar)."""
    dst = os.path.expanduser(dst)
    for _ in range(tempfile.TMP_MAX):
        tmp_dst = dst + "." + uuid.uuid4().hex + ".partial"
        try:
            f = open(tmp_dst, "w+b")  # noqa: SIM115
        except FileExistsError:
            continue
        break
    else:
        raise FileExistsError(errno.EEXIST, "No usable temporary file name found")
    try:
        with urlopen(Request(url, headers={"User-Agent": "torch.hub"})) as u:
            sha256 = hashlib.sha256() if hash_prefix is not None else None
            done = 0
            while True:
                buffer = u.read(READ_DATA_CHUNK)
                if not buffer:
                    break
                f.write(buffer)
                done += len(buffer)
                if sha256 is not None:
                    sha256.update(buffer)
            if progress:
                sys.stderr.write(f"{done} bytes downloaded\n")
            f.close()
            if sha256 is not None:
                digest = sha256.hexdigest()
                if digest[:len(hash_prefix)] != hash_prefix:
                    raise HubError(f'download_url_to_file: invalid hash value (expected "{hash_prefix}", '
                                   f'got "{digest}") for {url}')
        shutil.move(f.name, dst)
    finally:
        f.close()
        if os.path.exists(f.name):
            os.remove(f.name)


def load_state_dict_from_url(url: str, model_dir: str | None = None, map_location=None, progress: bool = True,
                             check_hash: bool = False, file_name: str | None = None, weights_only: bool = False):
    """The object saved at ``url`` (a torch ``.pt``/``.pth`` checkpoint, a torchlean or safetensors
    file), downloaded once into ``model_dir`` (default ``get_dir()/checkpoints``) under ``file_name``
    (default the URL's file name) and read by :func:`torchlean.load` with ``map_location``. With
    ``check_hash`` the file name's ``-<hex>.`` part must prefix the SHA-256 of the contents.
    ``weights_only`` has no effect: torchlean never runs code from a checkpoint. A legacy zip
    holding one file is extracted and that file read."""
    if os.getenv("TORCH_MODEL_ZOO"):
        warnings.warn("TORCH_MODEL_ZOO is deprecated, please use env TORCH_HOME instead", stacklevel=2)
    if model_dir is None:
        model_dir = os.path.join(get_dir(), "checkpoints")
    os.makedirs(model_dir, exist_ok=True)
    filename = file_name if file_name is not None else os.path.basename(urlparse(url).path)
    cached_file = os.path.join(model_dir, filename)
    if not os.path.exists(cached_file):
        sys.stdout.write(f'Downloading: "{url}" to {cached_file}\n')
        hash_prefix = None
        if check_hash:
            r = HASH_REGEX.search(filename)
            hash_prefix = r.group(1) if r else None
        download_url_to_file(url, cached_file, hash_prefix, progress=progress)
    if _is_legacy_zip_format(cached_file):
        with zipfile.ZipFile(cached_file) as zf:
            member = zf.infolist()[0]
            target = os.path.realpath(os.path.join(model_dir, member.filename))
            if not target.startswith(os.path.realpath(model_dir) + os.sep):
                raise HubError(f"load_state_dict_from_url: zip member {member.filename!r} escapes {model_dir}")
            zf.extract(member, model_dir)
        cached_file = target
    return _load(cached_file, map_location=map_location)


def _is_legacy_zip_format(filename: str) -> bool:
    if zipfile.is_zipfile(filename):
        with zipfile.ZipFile(filename) as zf:
            infolist = zf.infolist()
        return len(infolist) == 1 and not infolist[0].is_dir()
    return False


# ---- hubconf entrypoints ----------------------------------------------------------------------

@contextmanager
def _add_to_sys_path(path):
    sys.path.insert(0, path)
    try:
        yield
    finally:
        sys.path.remove(path)


def _hubconf(repo_or_dir, source, what):
    source = ("local" if os.path.isdir(repo_or_dir) else "github") if source is None else source.lower()
    if source not in ("github", "local"):
        raise HubError(f'{what}: Unknown source: "{source}". Allowed values: "github" | "local".')
    if source == "github":
        raise HubError(f"{what}: downloading repositories ({repo_or_dir!r}) is not supported: it means running "
                       f"code fetched from the network. Clone the repository yourself and pass its directory "
                       f"with source='local'")
    path = os.path.join(repo_or_dir, MODULE_HUBCONF)
    if not os.path.isfile(path):
        raise HubError(f"{what}: no {MODULE_HUBCONF} in {repo_or_dir!r}")
    spec = importlib.util.spec_from_file_location("hubconf", path)
    module = importlib.util.module_from_spec(spec)
    with _add_to_sys_path(repo_or_dir):
        spec.loader.exec_module(module)
    missing = [d for d in getattr(module, VAR_DEPENDENCY, None) or () if importlib.util.find_spec(d) is None]
    if missing:
        raise HubError(f"{what}: Missing dependencies: {', '.join(missing)}")
    return module


def _entry(module, model, what):
    if not isinstance(model, str):
        raise HubError(f"{what}: Invalid input: model should be a string of function name, got {model!r}")
    fn = getattr(module, model, None)
    if fn is None or not callable(fn):
        raise HubError(f"{what}: Cannot find callable {model} in hubconf")
    return fn


def list(github, force_reload=False, skip_validation=False, trust_repo="check", verbose=True, *, source=None):
    """The callable entrypoints (names not starting with ``_``) of ``github``'s ``hubconf.py``: a local
    directory (``source=None`` picks ``"local"`` for an existing directory, else ``"github"``, which
    raises: repositories are not downloaded; torch's ``list`` has no ``source``). ``force_reload``,
    ``skip_validation``, ``trust_repo`` and ``verbose`` concern downloads and have no effect.

        >>> import torchlean as tl, tempfile, os
        >>> t = tempfile.TemporaryDirectory(); d = t.name
        >>> _ = open(os.path.join(d, "hubconf.py"), "w").write("def tiny():\\n    return 1\\n")
        >>> tl.hub.list(d), tl.hub.load(d, "tiny", source="local")
        (['tiny'], 1)
        >>> t.cleanup()
    """
    module = _hubconf(github, source, "hub.list")
    with _add_to_sys_path(github):
        return [f for f in dir(module) if callable(getattr(module, f)) and not f.startswith("_")]


def help(github, model, force_reload=False, skip_validation=False, trust_repo="check", *, source=None):
    """The docstring of entrypoint ``model`` of ``github``'s ``hubconf.py`` (a local directory)."""
    return _entry(_hubconf(github, source, "hub.help"), model, "hub.help").__doc__


def load(repo_or_dir, model, *args, source="github", trust_repo="check", force_reload=False, verbose=True,
         skip_validation=False, **kwargs):
    """``model(*args, **kwargs)``, the entrypoint of ``repo_or_dir``'s ``hubconf.py``, with
    ``source="local"``; ``source="github"`` (torch's default) raises :class:`HubError`: repositories are
    not downloaded. ``trust_repo``, ``force_reload``, ``verbose`` and ``skip_validation`` concern
    downloads and have no effect."""
    module = _hubconf(repo_or_dir, source, "hub.load")
    fn = _entry(module, model, "hub.load")
    with _add_to_sys_path(repo_or_dir):
        return fn(*args, **kwargs)

