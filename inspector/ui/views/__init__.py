"""The data views: each subscribes, in the run store, to the frames it shows, reads them from
there, and paints only when visible."""

from inspector.ui.views.activation_view import ActivationView
from inspector.ui.views.cam_view import CamView
from inspector.ui.views.gradient_view import GradientView
from inspector.ui.views.input_stats_view import InputStatsView
from inspector.ui.views.predictions_view import PredictionsView

__all__ = ["ActivationView", "CamView", "GradientView", "InputStatsView", "PredictionsView"]
