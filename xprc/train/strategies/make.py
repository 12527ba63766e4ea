"""A strategy by its name (`TrainConfig.strategy`, one of `STRATEGIES`)."""

from __future__ import annotations

from . import STRATEGIES
from .adc import ADC
from .base import Strategy
from .mcmc import MCMC

BY_NAME: dict[str, type[Strategy]] = {cls.name: cls for cls in (MCMC, ADC)}
if tuple(BY_NAME) != STRATEGIES:  # the list names them; this table implements them
    raise ImportError(f"strategies {tuple(BY_NAME)} differ from STRATEGIES {STRATEGIES}")


def make_strategy(name: str, method) -> Strategy:
    return BY_NAME[name](method)
