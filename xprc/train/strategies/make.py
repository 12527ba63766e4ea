"""A strategy by its name (`TrainConfig.strategy`, one of `STRATEGIES`)."""

from __future__ import annotations

from . import STRATEGIES
from .adc import ADC
from .base import Strategy
from .mcmc import MCMC

BY_NAME: dict[str, type[Strategy]] = {cls.name: cls for cls in (MCMC, ADC)}
assert tuple(BY_NAME) == STRATEGIES, "a strategy class for each name in STRATEGIES, in order"


def make_strategy(name: str, method) -> Strategy:
    return BY_NAME[name](method)
