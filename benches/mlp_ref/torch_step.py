"""PyTorch: the step in eager mode (autograd, torch.optim.SGD)."""
import torch
from common import setup, run, LR

w, b, data = setup()
params = [torch.tensor(v, requires_grad=True) for v in w + b]
W, B = params[:3], params[3:]
data = [(torch.from_numpy(x), torch.from_numpy(y).long()) for x, y in data]
opt = torch.optim.SGD(params, lr=LR)


def step(x, y):
    h = x
    for i in range(3):
        h = torch.addmm(B[i], h, W[i])
        if i < 2:
            h = torch.relu(h)
    loss = torch.nn.functional.cross_entropy(h, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.detach()


run(f"torch {torch.__version__} (eager)", step, data)
