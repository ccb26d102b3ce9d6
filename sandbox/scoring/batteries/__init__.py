"""Battery definitions, one data module each (``quick``, ``standard``, ``paper``), and the one
closed form their token-reversal cells take their random-policy error from."""


def uniform_reversal_error(H: int, V: int = 2) -> float:
    """Error of a uniform policy on token reversal under the to-first-error reward (``match``):
    1 − Σ_{k=1..H} V^−k / H, the expected correct prefix of uniform tokens. (Under 'per_position'
    it is 1 − 1/V.)"""
    return 1 - sum(float(V) ** -k for k in range(1, H + 1)) / H
