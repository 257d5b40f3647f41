"""Custom torch.autograd.Function subclasses inside a trained model: a linear layer with
save_for_backward and needs_input_grad, a straight-through sign estimator, a clamp with a leaky custom
gradient, a function with two outputs (sin, cos), and a setup_context-style scaled tanh.
torch.autograd.gradcheck (float64) checks the hand-written backwards.

Pass: gradcheck succeeds on each differentiable function, needs_input_grad is seen as expected, and the
model's full-batch loss drops by a factor.
"""
import json

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

device = "cuda" if torch.cuda.is_available() else "cpu"
rng = np.random.default_rng(0)
seen_needs = []


class LinearFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias=None):
        ctx.save_for_backward(x, weight, bias)
        out = x.mm(weight.t())
        if bias is not None:
            out = out + bias.unsqueeze(0).expand_as(out)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        x, weight, bias = ctx.saved_tensors
        seen_needs.append(tuple(ctx.needs_input_grad))
        gx = gw = gb = None
        if ctx.needs_input_grad[0]:
            gx = grad_out.mm(weight)
        if ctx.needs_input_grad[1]:
            gw = grad_out.t().mm(x)
        if bias is not None and ctx.needs_input_grad[2]:
            gb = grad_out.sum(0)
        return gx, gw, gb


class SignSTE(torch.autograd.Function):
    """sign(x) forward; identity gradient where |x| <= 1 (straight-through)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sign(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x.abs() <= 1).to(g.dtype)


class LeakyClamp(torch.autograd.Function):
    """clamp(x, lo, hi) forward; gradient 1 inside, `leak` outside (non-tensor args get None)."""

    @staticmethod
    def forward(ctx, x, lo, hi, leak):
        ctx.save_for_backward(x)
        ctx.lo, ctx.hi, ctx.leak = lo, hi, leak
        return x.clamp(lo, hi)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        inside = (x >= ctx.lo) & (x <= ctx.hi)
        return torch.where(inside, g, g * ctx.leak), None, None, None


class SinCos(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sin(x), torch.cos(x)

    @staticmethod
    def backward(ctx, g_sin, g_cos):
        (x,) = ctx.saved_tensors
        return g_sin * torch.cos(x) - g_cos * torch.sin(x)


class ScaledTanh(torch.autograd.Function):
    """setup_context style: forward without ctx."""

    @staticmethod
    def forward(x, scale):
        return torch.tanh(x) * scale

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, scale = inputs
        ctx.save_for_backward(x, scale)

    @staticmethod
    def backward(ctx, g):
        x, scale = ctx.saved_tensors
        t = torch.tanh(x)
        return g * scale * (1 - t * t), (g * t).sum().reshape(scale.shape)


# ---- gradcheck in float64 -------------------------------------------------------------------
def d64(*shape):
    return torch.from_numpy(rng.standard_normal(shape)).requires_grad_(True)


gc = {
    "linear": torch.autograd.gradcheck(LinearFn.apply, (d64(4, 3), d64(5, 3), d64(5)), eps=1e-6, atol=1e-4),
    "sincos": torch.autograd.gradcheck(SinCos.apply, (d64(6),)),
    "scaled_tanh": torch.autograd.gradcheck(ScaledTanh.apply, (d64(3, 2), d64(1))),
    # inside [lo, hi] the leaky clamp's gradient is the true one (outside it is deliberately not)
    "leaky_clamp": torch.autograd.gradcheck(lambda x: LeakyClamp.apply(x, -0.5, 0.5, 0.1),
                                            (torch.tensor([-0.4, -0.2, 0.1, 0.3], dtype=torch.float64,
                                                          requires_grad=True),)),
}
assert all(gc.values()), gc
seen_needs.clear()
# surrogate gradients are not the true ones: gradcheck must say so
bad_ok = torch.autograd.gradcheck(lambda x: SignSTE.apply(x) + x * 0, (d64(3),), raise_exception=False)
bad_clamp = torch.autograd.gradcheck(lambda x: LeakyClamp.apply(x, -0.5, 0.5, 0.1),
                                     (torch.tensor([-1.3, 0.2], dtype=torch.float64, requires_grad=True),),
                                     raise_exception=False)
assert bad_ok is False and bad_clamp is False

# needs_input_grad: only the weight requires grad here
xin = torch.ones(2, 3)
w = torch.ones(4, 3, requires_grad=True)
LinearFn.apply(xin, w, torch.zeros(4)).sum().backward()
assert seen_needs[-1] == (False, True, False), seen_needs
needs = list(seen_needs[-1])


# ---- a model built from them -----------------------------------------------------------------
class CustomLinear(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(o, i))
        self.bias = nn.Parameter(torch.empty(o))

    def forward(self, x):
        return LinearFn.apply(x, self.weight, self.bias)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = CustomLinear(6, 16)
        self.fc2 = CustomLinear(32, 16)
        self.fc3 = CustomLinear(16, 3)
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, x):
        h = self.fc1(x)
        s, c = SinCos.apply(h)
        h = self.fc2(torch.cat([s, c], dim=1))
        h = ScaledTanh.apply(h, self.scale)
        h = LeakyClamp.apply(h, -0.8, 0.8, 0.05)
        q = SignSTE.apply(h)                     # binarised features, trained through the STE
        return self.fc3(0.5 * h + 0.5 * q)


X = rng.standard_normal((256, 6)).astype(np.float32)
Wt = rng.standard_normal((6, 3)).astype(np.float32)
y = np.argmax(np.tanh(X @ Wt) + 0.1 * rng.standard_normal((256, 3)), axis=1)
X_t, y_t = torch.from_numpy(X).to(device), torch.from_numpy(y).to(device)

model = Net().to(device)
with torch.no_grad():
    for name, p in model.named_parameters():
        if name == "scale":
            continue
        fan_in = p.shape[1] if p.dim() == 2 else 1
        p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)).astype(np.float32) / np.sqrt(fan_in)
                                 * (1.0 if p.dim() == 2 else 0.1)))

opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
losses = []
for step in range(40):
    opt.zero_grad()
    loss = F.cross_entropy(model(X_t), y_t)
    loss.backward()
    opt.step()
    losses.append(loss.item())
with torch.no_grad():
    acc = (model(X_t).argmax(1) == y_t).float().mean().item()

print(f"gradcheck {gc}  loss {losses[0]:.4f} -> {losses[-1]:.4f}  acc {acc:.3f}")
assert losses[-1] < 0.6 * losses[0], losses
print("PORT-RESULT " + json.dumps({
    "backend": torch.__name__,
    "same_gradcheck": sorted(k for k, v in gc.items() if v),
    "same_bad_gradcheck": [bad_ok, bad_clamp],
    "same_needs_input_grad": needs,
    "same_loss_first": losses[0],
    "same_loss_5": losses[5],
    "loss_last": losses[-1],
    "acc": acc,
}))
