"""The data views: each takes frames through `handle_frame(frame)` and paints only when visible.

The window routes every frame to every view; a view ignores what it does not show.
"""

from inspector.ui.views.activation_view import ActivationView
from inspector.ui.views.cam_view import CamView
from inspector.ui.views.gradient_view import GradientView
from inspector.ui.views.input_stats_view import InputStatsView
from inspector.ui.views.predictions_view import PredictionsView

__all__ = ["ActivationView", "CamView", "GradientView", "InputStatsView", "PredictionsView"]
