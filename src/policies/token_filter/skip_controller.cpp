#include "policies/token_filter/skip_controller.h"

namespace ts {

bool controlled_skip(const ControllerParams& p, double& threshold, const SkipCount& observed, float score) {
  // The limits of the target are the limits of the threshold (the score's (1 - P)-quantile):
  // P = 0 never skips, P = 1 always does, whatever the threshold has learned.
  if (p.target <= 0) return false;
  if (p.target >= 1) return true;
  if (observed.decided > 0) {
    const double error = observed.rate() - p.target;
    threshold += p.lr * (p.printed_sign ? -error : error);
  }
  return score > threshold;
}

}  // namespace ts
