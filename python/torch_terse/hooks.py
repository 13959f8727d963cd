"""DDP comm hooks over terse.

    model.register_comm_hook(None, torch_terse.hooks.compress(codec="int8"))

compress() averages each gradient bucket with terse, compressed by `codec` (None: the
communicator's policy, TERSE_CODEC / TERSE_POLICY). Error feedback is keyed by the bucket: the
residual of bucket i is named after i and a generation that changes whenever the bucket's
parameters change (DDP rebuilds its buckets after the first step), so a rebuilt bucket starts
from a fresh residual instead of another bucket's, and the old one is freed.
"""


def compress(codec=None):
    generations = {}  # bucket index -> (signature, generation)

    def hook(state, bucket):
        import torch_terse

        backend = torch_terse.backend_of(state)
        tensor = bucket.buffer()
        index = bucket.index()
        signature = (tensor.numel(), str(tensor.dtype),
                     tuple(tuple(p.shape) for p in bucket.parameters()))
        known = generations.get(index)
        if known is None:
            generations[index] = (signature, 0)
        elif known[0] != signature:
            backend.reset_residual(_name(index, known[1]))
            generations[index] = (signature, known[1] + 1)
        name = _name(index, generations[index][1])
        work = backend.allreduce_named(tensor, name, codec or "", True)
        return work.get_future().then(lambda future: future.value()[0])

    return hook


def _name(index, generation):
    return "ddp.bucket%d.g%d" % (index, generation)
