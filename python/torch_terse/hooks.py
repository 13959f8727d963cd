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
    generations = {}  # bucket index -> (signature, generation, the names its calls used)
    low_rank = codec is not None and codec.split(":")[0] == "powersgd"

    def hook(state, bucket):
        import torch_terse

        backend = torch_terse.backend_of(state)
        buffer = bucket.buffer()
        index = bucket.index()
        shapes = tuple(tuple(p.shape) for p in bucket.parameters())
        signature = (buffer.numel(), str(buffer.dtype), shapes)
        generation = 0
        known = generations.get(index)
        if known is not None and known[0] != signature:
            for name in known[2]:
                backend.reset_residual(name)
            generation = known[1] + 1
        elif known is not None:
            generation = known[1]
        base = "ddp.bucket%d.g%d" % (index, generation)
        if not per_parameter:
            generations[index] = (signature, generation, [base])
            work = backend.allreduce_named(buffer, base, codec or "", True)
            return work.get_future().then(lambda future: future.value()[0])
        names = ["%s.p%d" % (base, i) for i in range(len(shapes))]
        generations[index] = (signature, generation, names)
        futures = []
        for name, shape, gradient in zip(names, shapes, bucket.gradients()):
            shaped = gradient.view(shape) if gradient.numel() else gradient
            this_codec = "none" if low_rank and shaped.dim() <= 1 else (codec or "")
            work = backend.allreduce_named(shaped, name, this_codec, True)
            futures.append(work.get_future())
        return torch.futures.collect_all(futures).then(lambda _: buffer)

    return hook

