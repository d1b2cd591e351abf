"""Clean, fp16: a MobileNetV2-style net (conv stem, inverted residuals with 3x3 depthwise convs,
BatchNorm, ReLU6, 1x1 projections, global pool, classifier), every parameter and input in
float16, eval.
"""
import torch
from torch import nn

PLANTED = None
DEVICES = ["cpu", "cuda"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "clean", "op": None, "kind": None}


def conv_bn(cin, cout, kernel, stride=1, groups=1, act=True):
    layers = [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    if act:
        layers.append(nn.ReLU6(inplace=True))
    return nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand=4):
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.conv = nn.Sequential(conv_bn(cin, hidden, 1), conv_bn(hidden, hidden, 3, stride, groups=hidden),
                                  conv_bn(hidden, cout, 1, act=False))

    def forward(self, x):
        return x + self.conv(x) if self.use_res else self.conv(x)


class MobileNetV2(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(conv_bn(3, 8, 3, 2), InvertedResidual(8, 8, 1), InvertedResidual(8, 16, 2),
                                      InvertedResidual(16, 16, 1))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(16, classes)

    def forward(self, x):
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


def get_model():
    torch.manual_seed(0)
    model = MobileNetV2()
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.running_mean.uniform_(-0.3, 0.3)
                module.running_var.uniform_(0.5, 2.0)
    return model.to(torch.float16).eval()


def get_inputs():
    generator = torch.Generator().manual_seed(1)
    return (torch.randn(2, 3, 16, 16, generator=generator).to(torch.float16),)
