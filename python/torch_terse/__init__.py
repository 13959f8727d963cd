"""terse as a torch.distributed backend.

    import torch_terse
    dist.init_process_group("terse")        # or "cpu:terse" on PyTorch 2.x

Importing the package registers the backend "terse". Every collective runs on one terse
communicator per process group, in call order on the group's own thread, and returns a Work at
once. Compression follows TERSE_CODEC / TERSE_POLICY as for any terse communicator;
torch_terse.hooks.compress() is a DDP comm hook that picks a codec per model and keys error
feedback by DDP's bucket. torch_terse.stats(group) returns the communicator's statistics.
"""
import torch
import torch.distributed as dist

from . import _C
from . import hooks  # noqa: F401  (torch_terse.hooks.compress)

__all__ = ["backend_of", "hooks", "stats", "set_codec", "reset_residual"]


def _create(store, rank, size, timeout):
    return _C.create(store, rank, size, timeout)


def _register():
    if "TERSE" in getattr(dist.Backend, "_plugins", {}):
        return
    try:  # PyTorch 2.x: say which devices the backend serves
        dist.Backend.register_backend("terse", _create, devices=["cpu"])
    except TypeError:  # PyTorch 1.13
        dist.Backend.register_backend("terse", _create)


def backend_of(group=None):
    """The terse process group behind `group` (the default group when None)."""
    if group is None:
        group = dist.distributed_c10d._get_default_group()
    if isinstance(group, _C.ProcessGroupTerse):
        return group
    get_backend = getattr(group, "_get_backend", None)  # PyTorch 2.x wraps backends
    if get_backend is not None:
        backend = get_backend(torch.device("cpu"))
        if isinstance(backend, _C.ProcessGroupTerse):
            return backend
    raise RuntimeError("torch_terse: the process group does not use the terse backend")


def stats(group=None):
    """The communicator's terseStats as a dict: counts, bytes and seconds, the last call's codec
    and algorithm."""
    return backend_of(group).stats()


def set_codec(codec, group=None):
    """terseCommSetCodec: every rank alike, e.g. "int8", "topk:ratio=0.01", "none"."""
    backend_of(group).set_codec(codec)


def reset_residual(name="", group=None):
    """Forgets the error-feedback residual of the tensor `name` (of every tensor when "")."""
    backend_of(group).reset_residual(name)


_register()
