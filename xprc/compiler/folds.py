"""The Python functions that fold numbers for the built-ins (builtin_functions.TABLE's `fold`):
float64 values of what the generated JAX computes, so a constant argument is evaluated at
compile time. Each uses the numerically stable form JAX computes, so a value that is finite
(however large or small its intermediate steps) folds to that value: sigmoid(-1000) is 0, not an
overflow reported as "not finite". Poles fold to what IEEE (and JAX) give: log(0) = -inf,
erfinv(1) = inf, lgamma(0) = inf; outside a domain, nan (the checker reports both)."""

from __future__ import annotations

import math

from xprc.compiler.names import _fold_float


def fold_pow(x, y):
    """x ^ y of two numbers: exact for small integer powers, else a float (nan/inf, no error;
    0 ^ y for y < 0 is inf, as in IEEE and JAX)."""
    if isinstance(x, int) and isinstance(y, int) and 0 <= y <= 64 and abs(x) < 2**16:
        return x**y
    if x == 0 and y < 0:
        return math.inf
    return _fold_float(math.pow, float(x), float(y))


def sigmoid(x):
    if x >= 0:
        return 1 / (1 + math.exp(-x))
    e = math.exp(x)  # x < 0: never overflows (1 / (1 + exp(-x)) would for x < -709)
    return e / (1 + e)


def softplus(x):
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


def log(x):
    return -math.inf if x == 0 else math.log(x)


def log1p(x):
    return -math.inf if x == -1 else math.log1p(x)


def rsqrt(x):
    return math.inf if x == 0 else 1 / math.sqrt(x)


def lgamma(x):
    """log |Gamma(x)| (jax.scipy.special.gammaln): inf at the poles 0, -1, -2, ..."""
    if x <= 0 and x == math.floor(x):
        return math.inf
    return math.lgamma(x)


def erfinv(y):
    """The x with erf(x) = y, for y in [-1, 1] (+-inf at +-1, nan outside): Newton steps on
    math.erf (math.erfc for |y| > 0.5, where 1 - |y| is exact) from the normal quantile, to
    float64 precision."""
    if math.isnan(y) or abs(y) > 1:
        return math.nan
    if abs(y) == 1:
        return math.copysign(math.inf, y)
    if y == 0:
        return y
    a = abs(y)
    tail = 1.0 - a  # exact for a >= 0.5 (Sterbenz)
    x = _normal_quantile(0.5 * tail) / -math.sqrt(2.0)  # erf(x) = 1 - 2 Phi(-x sqrt 2)
    for _ in range(60):
        gap = math.erf(x) - a if a <= 0.5 else tail - math.erfc(x)
        step = gap / (2.0 / math.sqrt(math.pi) * math.exp(-x * x))
        x -= step
        if abs(step) <= 1e-17 * max(abs(x), 1e-300):
            break
    return math.copysign(x, y)


def _normal_quantile(p: float) -> float:
    """Phi^-1(p) for p in (0, 0.5]: a starting point only (statistics' rational approximation),
    which erfinv refines."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(p)
