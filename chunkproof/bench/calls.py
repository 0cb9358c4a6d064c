"""Our kernels and FLA's called the same way: forward alone, forward + backward of
L = <dO, O> + <dS_T, S_T> into every input and the initial state."""
import torch

from chunkproof.fuzz.cases import kernel, module


def ours(variant):
    """(generated module, its public function)."""
    return module(variant), kernel(variant)


@torch.no_grad()
def forward(fn, inputs, h0=None, scale=None):
    """(o, final state) of fn(*inputs) (no grad)."""
    return fn(*inputs.values(), scale=scale, initial_state=h0, output_final_state=True)


def fwd_bwd(fn, inputs, h0, do, dht, scale=None):
    """(o, {name: gradient}) with gradients for every input and 'initial_state'."""
    o, _, grads = fwd_bwd_state(fn, inputs, h0, do, dht, scale)
    return o, grads


def fwd_bwd_state(fn, inputs, h0, do, dht, scale=None):
    """(o, final state, {name: gradient}): fwd_bwd's, with the final state kept."""
    leaves = [x.detach().requires_grad_() for x in inputs.values()] + [h0.detach().requires_grad_()]
    with torch.enable_grad():
        o, ht = fn(*leaves[:-1], scale=scale, initial_state=leaves[-1], output_final_state=True)
        grads = torch.autograd.grad([o, ht], leaves, [do, dht])
    return o.detach(), ht.detach(), dict(zip(list(inputs) + ["initial_state"], grads))


def of_mode(mode, fn, inputs, h0, do, dht, scale=None):
    """A call of ``fn`` taking no arguments: its forward alone ("fwd": no initial state, as
    the bench's forward rows) or its forward + backward ("fwd+bwd")."""
    if mode == "fwd":
        return lambda: forward(fn, inputs, None, scale)
    return lambda: fwd_bwd(fn, inputs, h0, do, dht, scale)
