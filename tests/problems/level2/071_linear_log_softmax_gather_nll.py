import torch
import torch.nn as nn


class Model(nn.Module):
    """Classifier head: Linear, log_softmax, the target's log-probability gathered, negative mean."""

    def __init__(self, in_features: int, num_classes: int):
        super().__init__()
        self.fc = nn.Linear(in_features, num_classes)

    def forward(self, x, target):
        logp = torch.log_softmax(self.fc(x), dim=-1)
        picked = logp.gather(1, target.unsqueeze(1))
        return -picked.mean()


# The class count is the Linear's, so targets stay in range at the harness's shapes.
def get_inputs():
    return [torch.randn(8192, 4096), torch.randint(0, 2048, (8192,))]


def get_init_inputs():
    return [4096, 4096]


def get_cpu_inputs():
    return [torch.randn(13, 61), torch.randint(0, 23, (13,))]


def get_cpu_init_inputs():
    return [61, 47]
