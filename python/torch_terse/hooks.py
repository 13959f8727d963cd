"""DDP comm hooks over terse.

    model.register_comm_hook(None, torch_terse.hooks.compress(codec="int8"))

compress() averages each gradient bucket with terse, compressed by `codec` (None: the
communicator's policy, TERSE_CODEC / TERSE_POLICY).

- per_parameter=False (default): one allreduce of the bucket's flat buffer.
- per_parameter=True: one allreduce per parameter, with its shape, as PyTorch's PowerSGD hook
  compresses each parameter's own matrix. Low-rank codecs need it: a flat bucket gives them a
  near-square view of a concatenation of layers. Vectors (biases, norms) then go uncompressed
  when the codec is low-rank, as PyTorch's hook leaves them.

Error feedback is keyed by the bucket: names carry the bucket's index and a generation that
changes whenever the bucket's parameters change (DDP rebuilds its buckets after the first step),
so a rebuilt bucket starts from fresh residuals instead of another bucket's, and the old ones are
freed.
"""

import torch


def compress(codec=None, per_parameter=False):
    generations = {}  # bucket index -> (signature, generation)
    low_rank = codec is not None and codec.split(":")[0] == "powersgd"

    def hook(state, bucket):
        import torch_terse

        backend = torch_terse.backend_of(state)
        buffer = bucket.buffer()
        index = bucket.index()
        shapes = tuple(tuple(p.shape) for p in bucket.parameters())
        signature = (buffer.numel(), str(buffer.dtype), shapes, per_parameter)
        known = generations.get(index)
        if known is None:
            generations[index] = (signature, 0)
        elif known[0] != signature:
            old = _name(index, known[1])
            names = [old + ".p%d" % i for i in range(len(known[0][2]))] if known[0][3] else [old]
            for name in names:
                backend.reset_residual(name)
            generations[index] = (signature, known[1] + 1)
        name = _name(index, generations[index][1])
        if not per_parameter:
            work = backend.allreduce_named(buffer, name, codec or "", True)
            return work.get_future().then(lambda future: future.value()[0])
        futures = []
        for i, gradient in enumerate(bucket.gradients()):
            shaped = gradient.view(shapes[i]) if gradient.numel() else gradient
            this_codec = "none" if low_rank and shaped.dim() <= 1 else (codec or "")
            work = backend.allreduce_named(shaped, "%s.p%d" % (name, i), this_codec, True)
            futures.append(work.get_future())
        return torch.futures.collect_all(futures).then(lambda _: buffer)

    return hook


def _name(index, generation):
    return "ddp.bucket%d.g%d" % (index, generation)
