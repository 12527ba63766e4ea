"""Densification strategies behind one interface (`base.Strategy`), both inside a static
capacity:

- `mcmc` (3DGS-MCMC, Kheradmand et al. 2024): relocation of dead primitives; `mcmc.py`.
- `adc` (3DGS adaptive density control, Kerbl et al. 2023): clone, split, prune; `adc.py`.

`STRATEGIES` is the one list of their names, which `TrainConfig` checks and `xprc train
--strategy` offers; `make.make_strategy` builds one by name. This file imports none of the
strategies: they read `TrainConfig` (and the roles, which raise `TrainError`), and the config
reads this list.
"""

STRATEGIES = ("mcmc", "adc")

__all__ = ["STRATEGIES"]
