"""``scipy.stats`` distributions for traced values, in every argument with a closed form.

``norm``, ``t``, ``gamma``, ``beta``, ``chi2``, ``expon``, ``laplace``, ``logistic``,
``cauchy`` (``logpdf``, ``pdf``, ``cdf``, ``logcdf``, ``sf``, ``logsf``; ``norm.ppf``),
``poisson`` (``logpmf``, ``pmf``, ``cdf``, ``sf`` in ``mu``), ``multivariate_normal``
(``logpdf``, ``pdf`` in ``x``, ``mean`` and ``cov``) and ``dirichlet`` (``logpdf``,
``pdf`` in ``x`` and ``alpha``), with scipy's argument names and order; calling a
distribution (``norm(loc, scale)``) freezes its parameters, as in scipy.

Plain arrays go to scipy itself. On traced values the densities are numpy formulas of
differentiable ``scipy.special`` functions, so both modes and every order work. A CDF in a
shape parameter without a closed-form derivative (``gamma.cdf`` in ``a``, ``beta.cdf`` in
``a`` / ``b``, ``t.cdf`` and ``chi2.cdf`` in ``df``) raises :class:`~dualad.MissingRuleError`.
Outside the support a log density is ``-inf`` with zero gradient, as scipy's value.

Example:
    >>> import numpy as np, dualad as ad
    >>> from dualad.scipy_rules import stats
    >>> ad.grad(lambda mu, s: stats.norm.logpdf(1.0, mu, s), argnums=(0, 1))(0.0, 1.0)
    (array(1.), array(0.))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.special as _sp
import scipy.stats as _st

from ..extend import define_table_rules, shape_of
from ._dropin import dropin
from .linalg import solve_triangular

__all__ = ["norm", "t", "gamma", "beta", "chi2", "expon", "laplace", "logistic", "cauchy",
           "poisson", "multivariate_normal", "dirichlet"]

_LOG_2PI = np.log(2.0 * np.pi)

define_table_rules(scipy=True)


def _safe(ok: Any, x: Any, fill: float) -> Any:
    """``x`` where ``ok``, else ``fill``: keeps formulas finite outside the support (so the
    unused branch of ``np.where`` has no nan derivative)."""
    return np.where(ok, x, fill)


class _Frozen:
    """A distribution with its parameters fixed: ``norm(0, 2).logpdf(x)``."""

    def __init__(self, dist: Any, args: tuple, kwargs: dict) -> None:
        self.dist, self.args, self.kwargs = dist, args, kwargs

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self.dist, name)

        def call(x: Any) -> Any:
            return method(x, *self.args, **self.kwargs)

        return call


class _Continuous:
    """A univariate continuous distribution from ``logpdf``/``logcdf``/``logsf`` formulas
    of the standardised variable ``z = (x - loc) / scale``."""

    name = ""
    shapes: tuple[str, ...] = ()

    def __init__(self) -> None:
        scipy_dist = getattr(_st, self.name)
        for method in ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf"):
            impl = getattr(self, f"_{method}", None)
            if impl is None:
                continue
            setattr(self, method, dropin(getattr(scipy_dist, method))(impl))

    def __call__(self, *args: Any, **kwargs: Any) -> _Frozen:
        return _Frozen(self, args, kwargs)

    def _split(self, args: tuple, kwargs: dict) -> tuple[list[Any], Any, Any]:
        n = len(self.shapes)
        shapes = list(args[:n]) + [kwargs.pop(s) for s in self.shapes[len(args[:n]):]]
        rest = list(args[n:])
        loc = rest[0] if len(rest) > 0 else kwargs.pop("loc", 0.0)
        scale = rest[1] if len(rest) > 1 else kwargs.pop("scale", 1.0)
        if kwargs:
            raise TypeError(f"scipy.stats.{self.name}: unexpected arguments {sorted(kwargs)}")
        return shapes, loc, scale

    # subclasses: std_logpdf(z, *shapes), and std_cdf / std_sf / std_logcdf / std_logsf
    def std_logpdf(self, z: Any, *shapes: Any) -> Any:
        raise NotImplementedError

    def std_cdf(self, z: Any, *shapes: Any) -> Any:
        raise NotImplementedError

    def std_sf(self, z: Any, *shapes: Any) -> Any:
        return 1.0 - self.std_cdf(z, *shapes)

    def std_logcdf(self, z: Any, *shapes: Any) -> Any:
        return np.log(self.std_cdf(z, *shapes))

    def std_logsf(self, z: Any, *shapes: Any) -> Any:
        return np.log(self.std_sf(z, *shapes))

    def _logpdf(self, x: Any, *args: Any, **kwargs: Any) -> Any:
        shapes, loc, scale = self._split(args, kwargs)
        z = (x - loc) / scale
        return self.std_logpdf(z, *shapes) - np.log(scale)

    def _pdf(self, x: Any, *args: Any, **kwargs: Any) -> Any:
        return np.exp(self._logpdf(x, *args, **kwargs))

    def _cdf(self, x: Any, *args: Any, **kwargs: Any) -> Any:
        shapes, loc, scale = self._split(args, kwargs)
        return self.std_cdf((x - loc) / scale, *shapes)

    def _sf(self, x: Any, *args: Any, **kwargs: Any) -> Any:
        shapes, loc, scale = self._split(args, kwargs)
        return self.std_sf((x - loc) / scale, *shapes)

    def _logcdf(self, x: Any, *args: Any, **kwargs: Any) -> Any:
        shapes, loc, scale = self._split(args, kwargs)
        return self.std_logcdf((x - loc) / scale, *shapes)

    def _logsf(self, x: Any, *args: Any, **kwargs: Any) -> Any:
        shapes, loc, scale = self._split(args, kwargs)
        return self.std_logsf((x - loc) / scale, *shapes)


class _Norm(_Continuous):
    name = "norm"

    def std_logpdf(self, z: Any) -> Any:
        return -0.5 * z * z - 0.5 * _LOG_2PI

    def std_cdf(self, z: Any) -> Any:
        return _sp.ndtr(z)

    def std_sf(self, z: Any) -> Any:
        return _sp.ndtr(-z)

    def std_logcdf(self, z: Any) -> Any:
        return _sp.log_ndtr(z)

    def std_logsf(self, z: Any) -> Any:
        return _sp.log_ndtr(-z)

    def _ppf(self, q: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        return loc + scale * _sp.ndtri(q)


class _T(_Continuous):
    name = "t"
    shapes = ("df",)

    def std_logpdf(self, z: Any, df: Any) -> Any:
        return (_sp.gammaln((df + 1) / 2) - _sp.gammaln(df / 2) - 0.5 * np.log(df * np.pi)
                - (df + 1) / 2 * np.log1p(z * z / df))

    def std_cdf(self, z: Any, df: Any) -> Any:
        return _sp.stdtr(df, z)

    def std_sf(self, z: Any, df: Any) -> Any:
        return _sp.stdtr(df, -z)


class _Gamma(_Continuous):
    name = "gamma"
    shapes = ("a",)

    def std_logpdf(self, z: Any, a: Any) -> Any:
        ok = z > 0
        zs = _safe(ok, z, 1.0)
        return np.where(ok, _sp.xlogy(a - 1, zs) - zs - _sp.gammaln(a), -np.inf)

    def std_cdf(self, z: Any, a: Any) -> Any:
        return _sp.gammainc(a, np.maximum(z, 0.0))

    def std_sf(self, z: Any, a: Any) -> Any:
        return _sp.gammaincc(a, np.maximum(z, 0.0))


class _Chi2(_Continuous):
    name = "chi2"
    shapes = ("df",)

    def std_logpdf(self, z: Any, df: Any) -> Any:
        return _GAMMA.std_logpdf(z / 2, df / 2) - np.log(2.0)

    def std_cdf(self, z: Any, df: Any) -> Any:
        return _GAMMA.std_cdf(z / 2, df / 2)

    def std_sf(self, z: Any, df: Any) -> Any:
        return _GAMMA.std_sf(z / 2, df / 2)


class _Beta(_Continuous):
    name = "beta"
    shapes = ("a", "b")

    def std_logpdf(self, z: Any, a: Any, b: Any) -> Any:
        ok = (z > 0) & (z < 1)
        zs = _safe(ok, z, 0.5)
        return np.where(ok, _sp.xlogy(a - 1, zs) + _sp.xlog1py(b - 1, -zs) - _sp.betaln(a, b),
                        -np.inf)

    def std_cdf(self, z: Any, a: Any, b: Any) -> Any:
        return _sp.betainc(a, b, np.clip(z, 0.0, 1.0))

    def std_sf(self, z: Any, a: Any, b: Any) -> Any:
        return _sp.betaincc(a, b, np.clip(z, 0.0, 1.0))


class _Expon(_Continuous):
    name = "expon"

    def std_logpdf(self, z: Any) -> Any:
        ok = z >= 0
        return np.where(ok, -_safe(ok, z, 0.0), -np.inf)

    def std_cdf(self, z: Any) -> Any:
        return -np.expm1(-np.maximum(z, 0.0))

    def std_sf(self, z: Any) -> Any:
        return np.exp(-np.maximum(z, 0.0))

    def std_logsf(self, z: Any) -> Any:
        return -np.maximum(z, 0.0)


class _Laplace(_Continuous):
    name = "laplace"

    def std_logpdf(self, z: Any) -> Any:
        return -np.abs(z) - np.log(2.0)

    def std_cdf(self, z: Any) -> Any:
        return np.where(z < 0, 0.5 * np.exp(np.minimum(z, 0.0)),
                        1.0 - 0.5 * np.exp(-np.maximum(z, 0.0)))

    def std_sf(self, z: Any) -> Any:
        return self.std_cdf(-z)


class _Logistic(_Continuous):
    name = "logistic"

    def std_logpdf(self, z: Any) -> Any:
        return -np.abs(z) - 2.0 * np.log1p(np.exp(-np.abs(z)))

    def std_cdf(self, z: Any) -> Any:
        return _sp.expit(z)

    def std_sf(self, z: Any) -> Any:
        return _sp.expit(-z)

    def std_logcdf(self, z: Any) -> Any:
        return _sp.log_expit(z)

    def std_logsf(self, z: Any) -> Any:
        return _sp.log_expit(-z)


class _Cauchy(_Continuous):
    name = "cauchy"

    def std_logpdf(self, z: Any) -> Any:
        return -np.log(np.pi) - np.log1p(z * z)

    def std_cdf(self, z: Any) -> Any:
        return 0.5 + np.arctan(z) / np.pi

    def std_sf(self, z: Any) -> Any:
        return 0.5 - np.arctan(z) / np.pi


_GAMMA = _Gamma()
norm = _Norm()
t = _T()
gamma = _GAMMA
chi2 = _Chi2()
beta = _Beta()
expon = _Expon()
laplace = _Laplace()
logistic = _Logistic()
cauchy = _Cauchy()


# -- poisson ------------------------------------------------------------------------------------


class _Poisson:
    """The Poisson distribution, differentiable in ``mu`` (``k`` is an integer)."""

    def __init__(self) -> None:
        for method in ("logpmf", "pmf", "cdf", "sf"):
            setattr(self, method, dropin(getattr(_st.poisson, method))(
                getattr(self, f"_{method}")))

    def __call__(self, *args: Any, **kwargs: Any) -> _Frozen:
        return _Frozen(self, args, kwargs)

    def _logpmf(self, k: Any, mu: Any, loc: Any = 0) -> Any:
        k = k - loc
        ok = (k >= 0) & (k == np.floor(k))
        ks = np.where(ok, k, 0.0)
        return np.where(ok, _sp.xlogy(ks, mu) - mu - _sp.gammaln(ks + 1), -np.inf)

    def _pmf(self, k: Any, mu: Any, loc: Any = 0) -> Any:
        return np.exp(self._logpmf(k, mu, loc))

    def _cdf(self, k: Any, mu: Any, loc: Any = 0) -> Any:
        k = np.floor(k - loc)
        return np.where(k >= 0, _sp.pdtr(np.maximum(k, 0.0), mu), 0.0)

    def _sf(self, k: Any, mu: Any, loc: Any = 0) -> Any:
        return 1.0 - self._cdf(k, mu, loc)


poisson = _Poisson()


# -- multivariate normal, dirichlet ---------------------------------------------------------------


def _as_cov(cov: Any, d: int) -> Any:
    nd = len(shape_of(cov))
    if nd == 0:
        return cov * np.eye(d)
    if nd == 1:
        return np.expand_dims(cov, -1) * np.eye(d)
    return cov


class _MultivariateNormal:
    """``logpdf(x, mean=None, cov=1)``: ``x`` of shape ``(..., d)``; ``cov`` a matrix, a
    vector (its diagonal) or a number (times the identity), read through its Cholesky
    factor (the lower triangle)."""

    def __init__(self) -> None:
        self.logpdf = dropin(_st.multivariate_normal.logpdf)(self._logpdf)
        self.pdf = dropin(_st.multivariate_normal.pdf)(self._pdf)

    def __call__(self, *args: Any, **kwargs: Any) -> _Frozen:
        return _Frozen(self, args, kwargs)

    def _logpdf(self, x: Any, mean: Any = None, cov: Any = 1, allow_singular: bool = False
                ) -> Any:
        d = shape_of(mean)[-1] if mean is not None and shape_of(mean) else shape_of(x)[-1]
        diff = x if mean is None else x - mean
        if len(shape_of(diff)) == 0:
            diff = np.reshape(diff, (1,))
            d = 1
        low = np.linalg.cholesky(_as_cov(cov, d))
        flat = np.reshape(diff, (-1, d))
        sol = solve_triangular(low, np.swapaxes(flat, 0, 1), lower=True)
        maha = np.sum(sol * sol, axis=0)
        logdet = 2.0 * np.sum(np.log(np.diagonal(low)))
        out = -0.5 * (d * _LOG_2PI + logdet + maha)
        shape = shape_of(diff)[:-1]
        return np.reshape(out, shape) if shape else out[0]

    def _pdf(self, x: Any, mean: Any = None, cov: Any = 1, allow_singular: bool = False) -> Any:
        return np.exp(self._logpdf(x, mean, cov))


class _Dirichlet:
    """``logpdf(x, alpha)``: ``x`` of shape ``(K,)`` or ``(K, N)`` (components first)."""

    def __init__(self) -> None:
        self.logpdf = dropin(_st.dirichlet.logpdf)(self._logpdf)
        self.pdf = dropin(_st.dirichlet.pdf)(self._pdf)

    def __call__(self, *args: Any, **kwargs: Any) -> _Frozen:
        return _Frozen(self, args, kwargs)

    def _logpdf(self, x: Any, alpha: Any) -> Any:
        a = alpha if len(shape_of(x)) == 1 else np.expand_dims(alpha, -1)
        norm_const = _sp.gammaln(np.sum(alpha)) - np.sum(_sp.gammaln(alpha))
        return norm_const + np.sum(_sp.xlogy(a - 1, x), axis=0)

    def _pdf(self, x: Any, alpha: Any) -> Any:
        return np.exp(self._logpdf(x, alpha))


multivariate_normal = _MultivariateNormal()
dirichlet = _Dirichlet()


def __dir__() -> list[str]:
    """This module's face: scipy.stats' names, nothing else."""
    return sorted(__all__)
