"""https://github.com/pytorch/pytorch/issues/174016 — [Inductor] cumprod backward produces
incorrect gradients when input contains zeros (filed 2026-02-01, CUDA).

Thread: open, labelled triage review. The reporter traces it to Inductor's ``pattern_matcher``
(``masked_fill(...).flip().cumsum().flip()`` with a ``scatter_`` mask and two ``where``);
``pattern_matcher = False`` fixes it on CUDA.

Check on torch 2.13.0+cpu: max |eager grad - compiled grad| = 0 (the fp64 gradient agrees with
both to 1e-7). Class: clean control: a CUDA-reported backward bug whose CPU path gives eager's
gradient; the tool must say clean.
Edits: ``device = 'cuda'`` -> ``'cpu'``; the stored thread text ends at ``compiled_fn(x).``: the
``backward()`` that follows and the printed difference are completed from the description.
"""
REAL_REPORT = {
    "issue": 174016, "class": "clean_control",
    "verdict": "clean",
    "op": None,
    "cli_args": [],
    "known_miss": None,
}
import torch

device = 'cpu'
torch.manual_seed(42)

def test():
    # Create input with zeros
    x = torch.rand(4, 8, 32, device=device, requires_grad=True)
    x.data[:, 4, :] = 0  # Insert zeros at position 4
    x_ref = x.clone().detach().requires_grad_(True)

    def fn(x):
        return x.cumprod(dim=1).sum()

    # Eager backward
    fn(x_ref).backward()

    # Compiled backward with inductor
    torch._dynamo.reset()
    compiled_fn = torch.compile(fn, fullgraph=True, backend='inductor')
    compiled_fn(x).backward()
    print("max grad diff:", (x.grad - x_ref.grad).abs().max().item())

test()
