"""The picture as Lucid parameterises it: a Fourier spectrum scaled by 1/f, decorrelated
colour, a sigmoid to pixels (lucid/optvis/param/spatial.py fft_image, color.py to_valid_rgb).

Lucid scales by sqrt(h*w) and calls TF's unnormalised inverse FFT, which is torch's
`norm="ortho"`; "/4" is Lucid's own constant. Each image's spectrum comes from its own
generator (settings.image_seed), so an image is the same whichever batch it is in.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

# The square root of ImageNet's colour correlation (Lucid's color_correlation_svd_sqrt),
# scaled by its largest column norm.
COLOR_CORRELATION_SVD_SQRT = np.array([[0.26, 0.09, 0.02],
                                       [0.27, 0.00, -0.05],
                                       [0.27, -0.09, 0.03]], np.float32)
MAX_NORM_SVD_SQRT = float(np.max(np.linalg.norm(COLOR_CORRELATION_SVD_SQRT, axis=0)))
COLOR_CORRELATION_NORMALIZED = COLOR_CORRELATION_SVD_SQRT / np.float32(MAX_NORM_SVD_SQRT)
LUCID_SCALE = 4.0  # Lucid divides the inverse FFT by 4


def rfft2d_freqs(h: int, w: int) -> np.ndarray:
    """|f| (cycles per pixel) of the rfft2 grid: (h, w//2 + 1), one column more for an odd w
    (Lucid keeps it; irfft ignores it)."""
    fy = np.fft.fftfreq(h)[:, None]
    fx = np.fft.fftfreq(w)[: w // 2 + (2 if w % 2 == 1 else 1)]
    return np.sqrt(fx * fx + fy * fy)


class FourierImage:
    """A batch of pictures (n, 3, h, w), one spectrum per seed; `param` is what Adam moves."""

    def __init__(self, seeds: Sequence[int], h: int, w: int, sd: float = 0.01,
                 decay_power: float = 1.0, device: torch.device | str = "cpu") -> None:
        self.h, self.w = int(h), int(w)
        freqs = rfft2d_freqs(self.h, self.w)
        scale = 1.0 / np.maximum(freqs, 1.0 / max(self.h, self.w)) ** decay_power
        self.scale = torch.tensor(scale, dtype=torch.float32, device=device)[None, None, ..., None]
        spectra = [torch.randn((3, *freqs.shape, 2), generator=torch.Generator().manual_seed(
            int(s))) * sd for s in seeds]
        self.param = torch.stack(spectra).to(device).requires_grad_(True)
        self.color = torch.from_numpy(COLOR_CORRELATION_NORMALIZED).to(device)

    def pixels(self) -> torch.Tensor:
        """(n, 3, h, w) in (0, 1), differentiable in `param`."""
        spectrum = torch.view_as_complex((self.scale * self.param).contiguous())
        img = torch.fft.irfftn(spectrum, s=(self.h, self.w), norm="ortho") / LUCID_SCALE
        img = torch.einsum("nchw,dc->ndhw", img, self.color)
        return torch.sigmoid(img)

    def uint8(self) -> np.ndarray:
        """(n, h, w, 3) uint8 pictures, rounded."""
        with torch.no_grad():
            px = self.pixels().permute(0, 2, 3, 1).clamp(0, 1)
            return (px * 255).round().to(torch.uint8).cpu().numpy()
