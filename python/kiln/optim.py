"""Optimizers over dicts of tensors."""
from . import _kiln


class AdamW:
    """AdamW as torch.optim.AdamW computes it (decoupled weight decay; norms,
    biases and embeddings undecayed, as kiln's trainer groups them), over a
    dict of parameters: ``params = opt.step(params, grads)`` returns the
    updated parameters (new tensors; the moments live in the optimizer)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1):
        self.names = list(params)
        self.lr = lr
        self._opt = _kiln.AdamW(self.names, [params[n] for n in self.names], betas[0], betas[1],
                                eps, weight_decay)

    def step(self, params, grads, lr=None):
        keys = list(params)
        if keys != self.names:
            raise _kiln.Error(f"AdamW.step: the parameters are not the ones it was made for "
                              f"(expected {len(self.names)} named as at construction)")
        new = self._opt.step([params[n] for n in keys], [grads[n] for n in keys],
                             self.lr if lr is None else lr)
        return dict(zip(keys, new))

    @property
    def steps(self):
        return self._opt.steps
