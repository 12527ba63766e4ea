"""What each accepted training step reports besides its loss: the strategy's densification
counts, alpha values the compositor clamped, primitives left out of the render for a
non-finite projection, and pixels outside the lens model's valid domain. Each is warned the
first time (a spec bug, a diverging scene, images beyond the lens's image circle), noted in
train.log step by step, and summed up once at the end of the run."""

from __future__ import annotations

import warnings

from ..pipeline.capacity import alpha_message, lens_message, nonfinite_message

# warnings point past StepReports and the loop (step_done <- Run.advance <- _loop <- train)
_STACKLEVEL = 5


class StepReports:
    """The run's reporting of step counts. `log(text, always=False)` prints and keeps a line;
    `log.file(text)` keeps it in train.log only."""

    def __init__(self, log, strategy, strategy_name: str, model: str | None = None) -> None:
        self.log = log
        self.model = model  # the training cameras' lens model (named by the lens warning)
        self.strategy = strategy
        self.strategy_name = strategy_name
        self.events: dict = {k: 0 for k in strategy.count_names}  # densification totals
        self.clamped_alpha = 0  # alpha values the compositor clamped, summed over steps
        self.left_out = 0  # the most primitives a step left out for a non-finite projection
        self.last_left_out = 0  # the last step's count (train.log notes each change)
        self.outside = 0  # the most pixels a step's views had outside the lens's domain
        self.last_outside = 0

    def step_done(self, step: int, info) -> None:
        """Report the accepted step `step`'s info (host numbers)."""
        self.clamped(step, int(info["alpha_out_of_range"]))
        self.lost(step, int(info["nonfinite"]))
        self.lens(step, int(info["lens_outside"]))
        self.counts(step, {k: int(info[k]) for k in self.strategy.count_names})

    def counts(self, step: int, counts: dict) -> None:
        """A densification event's counts, added to the run's totals and logged; a count of
        what was not done or only approximated (the strategy's `count_notes`) is shown with its
        meaning when nonzero, and its run total again at the end."""
        if not any(counts.values()):
            return
        notes = getattr(self.strategy, "count_notes", {})
        for k, v in counts.items():
            self.events[k] += v
        text = ", ".join(
            f"{k} {v:,}" + (f" ({notes[k]})" if k in notes else "")
            for k, v in counts.items()
            if v or k not in notes
        )
        self.log(f"step {step}: {self.strategy_name} {text}")

    def lost(self, step: int, count: int) -> None:
        """Primitives whose finite parameters project out of float range (a scale grown huge)
        are left out of the render: warned at the first step, each step's count in train.log
        when it changes, the largest at the end."""
        if count and not self.left_out:
            warnings.warn(f"training step {step}: {nonfinite_message(count)}",
                          RuntimeWarning, stacklevel=_STACKLEVEL)  # fmt: skip
        if count != self.last_left_out:
            self.log.file(f"step {step}: {count:,} primitive(s) left out (non-finite "
                          "projection)")  # fmt: skip
        self.last_left_out = count
        self.left_out = max(self.left_out, count)

    def lens(self, step: int, count: int) -> None:
        """Pixels of the step's views outside the lens model's valid domain (the images reach
        beyond a fisheye's image circle, say; `capacity.lens_message` says what that implies
        for each model): warned once, each change in train.log, the largest at the end."""
        if count and not self.outside:
            warnings.warn(f"training step {step}: {lens_message(count, self.model)}",
                          RuntimeWarning, stacklevel=_STACKLEVEL)  # fmt: skip
        if count != self.last_outside:
            self.log.file(f"step {step}: {count:,} pixel(s) outside the lens's valid domain")
        self.last_outside = count
        self.outside = max(self.outside, count)

    def clamped(self, step: int, count: int) -> None:
        """A response whose alpha leaves [0, 1) is a spec bug: warned at the first step it
        happens, every such step in train.log, the run's total at the end."""
        if not count:
            return
        if not self.clamped_alpha:
            warnings.warn(f"training step {step}: {alpha_message(count)}",
                          RuntimeWarning, stacklevel=_STACKLEVEL)  # fmt: skip
        self.clamped_alpha += count
        self.log.file(f"step {step}: {count:,} alpha value(s) clamped into range")

    def finish(self) -> None:
        """The run's totals, always shown: primitives left out, clamped alphas, and each
        nonzero `count_notes` count."""
        if self.left_out:
            self.log(f"up to {self.left_out:,} primitive(s) a step were left out of the render "
                     "for a non-finite projection (see the warning and train.log)",
                     always=True)  # fmt: skip
        if self.outside:
            self.log(f"up to {self.outside:,} pixel(s) a step lay outside the lens model's valid "
                     "domain (see the warning and train.log)",
                     always=True)  # fmt: skip
        if self.clamped_alpha:
            self.log(f"{self.clamped_alpha:,} alpha value(s) the response gave outside its "
                     "range were clamped during training (see the warning and train.log)",
                     always=True)  # fmt: skip
        for k, note in getattr(self.strategy, "count_notes", {}).items():
            if self.events.get(k):
                self.log(f"{self.strategy_name}: {k} {self.events[k]:,} in total ({note}; "
                         "each event in train.log, the total in metrics.json densification)",
                         always=True)  # fmt: skip
