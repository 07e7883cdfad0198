import torch
import torch.nn as nn


class Model(nn.Module):
    """index_add along dim 0: message rows added into the rows of x their destination index names."""

    def forward(self, x, index, messages):
        return x.index_add(0, index % x.shape[0], messages)


def get_inputs():
    return [torch.randn(65536, 256), torch.randint(0, 65536, (131072,)), torch.randn(131072, 256)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(29, 24), torch.randint(0, 29, (57,)), torch.randn(57, 24)]


def get_cpu_init_inputs():
    return []
