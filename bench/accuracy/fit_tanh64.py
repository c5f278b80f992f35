#!/usr/bin/env python3
"""Fits float64 tanh's polynomial in ops/cpu/unary_ops.h (kTanhPoly64).

tanh(x) ~ x + x^3 P(x^2) on [0, C]: P interpolates g(t) = (tanh(sqrt t) / sqrt t - 1) / t at the
Chebyshev points of [0, C^2], in 80-digit decimal arithmetic (the standard library only), the
interpolating polynomial solved exactly in fractions. Prints the largest relative error of
x + x^3 P(x^2) with P's coefficients rounded to float64 (evaluated exactly, on 2000 points) and
the coefficients, highest degree first as kTanhPoly64 lists them. float64_ulp.cpp measures the
float64 code.

  python3 bench/accuracy/fit_tanh64.py [C degree]      (default: 0.7 12)
"""
import decimal
import sys
from fractions import Fraction

D = decimal.Decimal
decimal.getcontext().prec = 80


def tanh(x):
    e = (2 * x).exp()
    return (e - 1) / (e + 1)


def g(t):
    x = t.sqrt()
    return (tanh(x) / x - 1) / t


def cos(a):
    total, term, i = D(1), D(1), 0
    while abs(term) > D(10) ** -75:
        i += 2
        term = -term * a * a / (i * (i - 1))
        total += term
    return total


def pi():
    # Machin: pi = 16 atan(1/5) - 4 atan(1/239)
    def atan_inv(n):
        total, term, k, sign = D(0), D(1) / n, 1, 1
        while term > D(10) ** -78:
            total += sign * term / k
            term /= n * n
            k += 2
            sign = -sign
        return total
    return 16 * atan_inv(5) - 4 * atan_inv(239)


def fit(c2, degree):
    n = degree + 1
    nodes = [c2 / 2 * (1 + cos((2 * k + 1) * pi() / (2 * n))) for k in range(n)]
    rows = [[Fraction(t) ** j for j in range(n)] + [Fraction(g(t))] for t in nodes]
    for col in range(n):  # Gauss-Jordan, exact
        piv = max(range(col, n), key=lambda r: abs(rows[r][col]))
        rows[col], rows[piv] = rows[piv], rows[col]
        for r in range(n):
            if r != col and rows[r][col] != 0:
                f = rows[r][col] / rows[col][col]
                rows[r] = [a - f * b for a, b in zip(rows[r], rows[col])]
    return [float(rows[i][n] / rows[i][i]) for i in range(n)]


def main():
    c = D(sys.argv[1]) if len(sys.argv) > 1 else D("0.7")
    degree = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    coef = fit(c * c, degree)
    worst = D(0)
    for i in range(1, 2001):
        x = c * i / 2000
        t = x * x
        p = D(0)
        for a in reversed(coef):
            p = p * t + D(a)
        worst = max(worst, abs((x + x * t * p) / tanh(x) - 1))
    print(f"largest relative error on [0, {c}]: {float(worst):.3e}")
    print(", ".join(repr(a) for a in reversed(coef)))


if __name__ == "__main__":
    main()
