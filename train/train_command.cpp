// `flashtrain train`: the Trainer over a validated config (cli.cpp has checked config and data).
#include <iomanip>
#include <ostream>

#include "train/command_options.h"
#include "train/trainer.h"

namespace ft {

int run_train(const TrainOptions& options, const TrainConfig& cfg, std::ostream& out, std::ostream&) {
  TrainerOptions to;
  to.resume = options.resume;
  to.init_from = options.init_from;
  to.out = &out;
  Trainer trainer(cfg, to);
  const TrainSummary s = trainer.run();
  if (s.end_step > s.start_step) {
    out << "flashtrain: done: steps " << s.start_step << " -> " << s.end_step << ", loss " << std::fixed
        << std::setprecision(4) << s.losses.front() << " -> " << s.losses.back();
    if (s.val_loss >= 0) out << ", val loss " << s.val_loss;
    out << std::setprecision(1) << ", " << s.tokens_per_s << " tokens/s, " << s.seconds << " s" << std::defaultfloat
        << std::setprecision(6) << "\n";
  }
  out << "flashtrain: results in " << cfg.out_dir << "/ (metrics.jsonl, ckpt-<step>/)\n";
  return 0;
}

}  // namespace ft
