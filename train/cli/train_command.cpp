// `flashtrain train`: the Trainer over a validated config (cli.cpp has checked config and data).
#include <iomanip>
#include <ostream>

#include "core/allocator.h"
#include "train/cli/command_options.h"
#include "train/dist/dist_env.h"
#include "train/dist/local_launcher.h"
#include "train/trainer.h"

namespace ft {

int run_train(const TrainOptions& options, const TrainConfig& cfg, std::ostream& out, std::ostream& err) {
  // NNODES / NODE_RANK / MASTER_ADDR / MASTER_PORT: this host is one node of several.
  const LaunchOptions nodes = node_launch_options();
  if (options.nproc > 1 || nodes.nnodes > 1) {
    // This process only launches: N copies of flashtrain, same arguments minus --nproc, each a rank.
    const DistEnv env = detect_dist_env();
    if (env.launcher != "single")
      throw Error(str("--nproc ", options.nproc, " inside a job that ", env.launcher, " launched already (", describe(env),
                      "); use one launcher"));
    std::vector<std::string> child_args = {"train"};
    for (const auto& a : without_nproc(options.args)) child_args.push_back(a);
    return launch_local(options.nproc, child_args, err, nodes);
  }
  TrainerOptions to;
  to.resume = options.resume;
  to.init_from = options.init_from;
  to.out = &out;
  Trainer trainer(cfg, to);
  const TrainSummary s = trainer.run();
  if (detect_dist_env().rank != 0) return 0;  // data parallel: rank 0 alone reports
  if (s.end_step > s.start_step) {
    out << "flashtrain: done: steps " << s.start_step << " -> " << s.end_step << ", loss " << std::fixed
        << std::setprecision(4) << s.losses.front() << " -> " << s.losses.back();
    if (s.val_loss >= 0) out << ", val loss " << s.val_loss;
    out << std::setprecision(1) << ", " << s.tokens_per_s << " tokens/s, " << s.seconds << " s";
    if (trainer.device().is_cuda()) {  // the caching allocator's peak: what the run needed at most
      out << ", peak device memory " << cuda_allocator(trainer.device().index).stats().peak_allocated_bytes / 1048576.0
          << " MiB";
    }
    out << std::defaultfloat << std::setprecision(6) << "\n";
  }
  out << "flashtrain: results in " << cfg.out_dir << "/ (metrics.jsonl, ckpt-<step>/)\n";
  return 0;
}

}  // namespace ft
