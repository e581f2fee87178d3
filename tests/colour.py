"""CIEDE2000 colour difference (Sharma, Wu and Dalal's formulation), for the legend's contrast rule."""

from __future__ import annotations

import math


def _lab(hex_colour: str) -> tuple[float, float, float]:
    """sRGB ``#rrggbb`` → CIE L*a*b* (D65)."""
    rgb = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    r, g, b = linear
    xyz = (
        (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047,
        (0.2126 * r + 0.7152 * g + 0.0722 * b) / 1.0,
        (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883,
    )
    f = [t ** (1 / 3) if t > 216 / 24389 else (24389 / 27 * t + 16) / 116 for t in xyz]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def delta_e(first: str, second: str) -> float:
    """CIEDE2000 ΔE between two sRGB colours.

    >>> round(delta_e("#ffffff", "#000000"), 1), delta_e("#123456", "#123456")
    (100.0, 0.0)
    """
    return delta_e_lab(_lab(first), _lab(second))


def delta_e_lab(first: tuple[float, float, float], second: tuple[float, float, float]) -> float:
    """CIEDE2000 ΔE of two L*a*b* colours; Sharma, Wu and Dalal's test pairs 1, 7 and 17:

    >>> round(delta_e_lab((50, 2.6772, -79.7751), (50, 0, -82.7485)), 4)
    2.0425
    >>> round(delta_e_lab((50, 0, 0), (50, -1, 2)), 4)
    2.3669
    >>> round(delta_e_lab((50, 2.5, 0), (73, 25, -18)), 4)
    27.1492
    """
    (l1, a1, b1), (l2, a2, b2) = first, second
    c_mean = (math.hypot(a1, b1) + math.hypot(a2, b2)) / 2
    g = 0.5 * (1 - math.sqrt(c_mean**7 / (c_mean**7 + 25**7)))
    a1, a2 = a1 * (1 + g), a2 * (1 + g)
    c1, c2 = math.hypot(a1, b1), math.hypot(a2, b2)
    h1 = math.degrees(math.atan2(b1, a1)) % 360
    h2 = math.degrees(math.atan2(b2, a2)) % 360
    dl, dc = l2 - l1, c2 - c1
    dh = 0.0 if c1 * c2 == 0 else (h2 - h1 if abs(h2 - h1) <= 180 else h2 - h1 - 360 * math.copysign(1, h2 - h1))
    dh_big = 2 * math.sqrt(c1 * c2) * math.sin(math.radians(dh / 2))
    l_mean, c_mean2 = (l1 + l2) / 2, (c1 + c2) / 2
    if c1 * c2 == 0:
        h_mean = h1 + h2
    elif abs(h1 - h2) <= 180:
        h_mean = (h1 + h2) / 2
    else:
        h_mean = (h1 + h2 + 360) / 2 if h1 + h2 < 360 else (h1 + h2 - 360) / 2
    t = (
        1
        - 0.17 * math.cos(math.radians(h_mean - 30))
        + 0.24 * math.cos(math.radians(2 * h_mean))
        + 0.32 * math.cos(math.radians(3 * h_mean + 6))
        - 0.20 * math.cos(math.radians(4 * h_mean - 63))
    )
    sl = 1 + 0.015 * (l_mean - 50) ** 2 / math.sqrt(20 + (l_mean - 50) ** 2)
    sc = 1 + 0.045 * c_mean2
    sh = 1 + 0.015 * c_mean2 * t
    rt = (
        -2
        * math.sqrt(c_mean2**7 / (c_mean2**7 + 25**7))
        * math.sin(math.radians(60 * math.exp(-(((h_mean - 275) / 25) ** 2))))
    )
    return math.sqrt((dl / sl) ** 2 + (dc / sc) ** 2 + (dh_big / sh) ** 2 + rt * (dc / sc) * (dh_big / sh))


# --- WCAG 2 contrast ------------------------------------------------------------------------

NAMED = {"white": "#ffffff", "black": "#000000"}


def hex_of(colour: str) -> str:
    """``#rrggbb`` of a Graphviz colour (a name it writes, ``#rrggbb`` or ``#rrggbbaa``)."""
    colour = NAMED.get(colour.lower(), colour.lower())
    return colour[:7]


def luminance(colour: str) -> float:
    """WCAG 2 relative luminance of an sRGB colour."""
    value = hex_of(colour)
    rgb = [int(value[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(text: str, background: str) -> float:
    """WCAG 2 contrast ratio of two colours, 1 to 21 (AA asks 4.5 of normal text).

    >>> round(contrast("#000000", "white"), 1), round(contrast("#57606a", "#b6939b"), 1)
    (21.0, 2.3)
    """
    light, dark = sorted((luminance(text), luminance(background)), reverse=True)
    return (light + 0.05) / (dark + 0.05)
