"""Densification strategies (split into base, mcmc and adc in the next step)."""
