// llmcc plot: training runs' log.jsonl files drawn as one SVG of four panels against the step:
// the training loss (validation loss dashed, with dots, in the run's colour), the learning rate,
// the throughput (tokens/s, or the rate field the log uses) and the gradient norm.
//
//   llmcc plot runs/a runs/b --out runs/compare.svg --title "lr 1e-3 vs 3e-3"
//   llmcc plot runs/a/log.jsonl --out a.svg --log-y
//
// Each LOG is a log.jsonl or a run directory holding one; a run is labelled by its directory's
// name (--label overrides). A null value (a non-finite number in the log) leaves a gap. A step
// logged twice keeps its last line. A malformed line is an error naming the file and line,
// except an incomplete last line (no newline yet: a run still writing it), which is skipped with
// a warning.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "args.h"
#include "commands.h"
#include "llmcc/error.h"
#include "svg_plot.h"
#include "io/json_reader.h"

namespace llmcc::cli {

namespace {

namespace fs = std::filesystem;
constexpr const char* kCmd = "llmcc plot";
constexpr double kNone = std::numeric_limits<double>::quiet_NaN();

struct StepRow {
  double loss = kNone, lr = kNone, grad_norm = kNone, rate = kNone;
};

struct Run {
  std::string label, path;
  std::map<std::int64_t, StepRow> steps;
  std::map<std::int64_t, double> val_loss;
  std::string rate_field;  // "tokens_per_s", "steps_per_s", ... (empty: none logged)
};

// The log.jsonl a LOG argument names, and the run's default label: the name of the directory
// holding the log (a log file not named log.jsonl is named after itself).
void locate(const std::string& arg, std::string* path, std::string* label) {
  std::error_code ec;
  const fs::path p(arg);
  if (!fs::exists(p, ec)) fail(kCmd, arg + " does not exist (give a run directory or its log.jsonl)");
  const bool is_dir = fs::is_directory(p, ec);
  const fs::path log = is_dir ? p / "log.jsonl" : p;
  if (is_dir && !fs::exists(log, ec))
    fail(kCmd, "run directory " + arg + " has no log.jsonl (was the log written elsewhere with --log?)");
  *path = log.string();
  if (!is_dir && log.filename() != "log.jsonl") {
    *label = log.stem().string();
    return;
  }
  const std::string name = fs::absolute(log, ec).lexically_normal().parent_path().filename().string();
  *label = name.empty() ? arg : name;
}

// A member as a number: NaN when absent or null; an error for any other kind.
double number(const JsonValue& line, const char* key, const std::string& where) {
  const JsonValue* v = line.find(key);
  if (v == nullptr || v->kind == JsonValue::Kind::Null) return kNone;
  if (v->kind != JsonValue::Kind::Number)
    fail(kCmd, where + ": \"" + key + "\" is " + v->kind_name() + ", expected a number or null");
  return v->number;
}

// The throughput field of a step line: the member whose name ends in "_per_s".
std::string rate_field_of(const JsonValue& line) {
  for (const auto& [key, value] : line.object)
    if (key.size() > 6 && key.ends_with("_per_s")) return key;
  return "";
}

Run read_run(const std::string& path, const std::string& label) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(kCmd, "cannot open " + path + " for reading");
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  if (text.empty()) fail(kCmd, path + " is empty: nothing to plot (has the run logged its first step yet?)");

  Run run;
  run.label = label;
  run.path = path;
  std::size_t begin = 0, line_no = 0, lines = 0;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    const bool complete = end != std::string::npos;
    if (!complete) end = text.size();
    const std::string_view line(text.data() + begin, end - begin);
    begin = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = path + ":" + std::to_string(line_no);
    JsonValue v;
    try {
      v = parse_json(line, path, kCmd);
    } catch (const Error& e) {
      if (!complete) {
        std::fprintf(stderr, "%s: warning: %s: skipped an incomplete last line (is the run still writing it?)\n", kCmd,
                     where.c_str());
        break;
      }
      // parse_json names line 1 of the text it was given; report the line of the file instead.
      std::string_view what = e.what();
      const std::string own = std::string("[") + kCmd + "] " + path + ":1:";
      if (what.starts_with(own)) fail(kCmd, where + ":" + std::string(what.substr(own.size())));
      fail(kCmd, where + ": " + std::string(what));
    }
    ++lines;
    if (v.kind != JsonValue::Kind::Object) fail(kCmd, where + ": a log line is a JSON object, got " + v.kind_name());
    const JsonValue* step = v.find("step");
    if (step == nullptr || step->kind != JsonValue::Kind::Number || !step->is_integer)
      fail(kCmd, where + ": every log line has an integer \"step\", " +
                     (step == nullptr                         ? std::string("this one has none")
                      : step->kind == JsonValue::Kind::Number ? "got " + json_number(step->number)
                                                              : "got " + std::string(step->kind_name())));
    if (v.find("loss") != nullptr) {
      StepRow row;
      row.loss = number(v, "loss", where);
      row.lr = number(v, "lr", where);
      row.grad_norm = number(v, "grad_norm", where);
      const std::string rate = rate_field_of(v);
      if (!rate.empty()) {
        if (run.rate_field.empty()) run.rate_field = rate;
        if (rate == run.rate_field) row.rate = number(v, rate.c_str(), where);
      }
      run.steps[step->integer] = row;
    }
    if (v.find("val_loss") != nullptr) run.val_loss[step->integer] = number(v, "val_loss", where);
  }
  if (run.steps.empty())
    fail(kCmd, path + " has no step lines (" + std::to_string(lines) + (lines == 1 ? " other line" : " other lines") +
                   "): nothing to plot (has the run finished its first step?)");
  return run;
}

// "tokens_per_s" -> "tokens/s".
std::string rate_title(const std::string& field) { return field.substr(0, field.size() - 6) + "/s"; }

// The throughput the panel shows: the first run's rate field (runs logging another are left out).
std::string common_rate_field(const std::vector<Run>& runs) {
  for (const Run& run : runs)
    if (!run.rate_field.empty()) return run.rate_field;
  return "";
}

SvgFigure figure(const std::vector<Run>& runs, const std::string& title, bool log_y) {
  SvgFigure fig;
  fig.title = title;
  fig.x_integer = true;
  bool any_val = false;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    fig.legend.push_back({runs[r].label, static_cast<int>(r)});
    any_val = any_val || !runs[r].val_loss.empty();
  }
  if (any_val) fig.legend_note = "solid: train loss, dashed with dots: validation loss";

  const std::string rate_field = common_rate_field(runs);

  fig.panels.resize(4);
  SvgPanel& loss = fig.panels[0];
  SvgPanel& lr = fig.panels[1];
  SvgPanel& rate = fig.panels[2];
  SvgPanel& norm = fig.panels[3];
  loss.title = any_val ? "loss (train, validation dashed)" : "training loss";
  lr.title = "learning rate";
  rate.title = rate_field.empty() ? "throughput" : rate_title(rate_field);
  norm.title = "gradient norm (before clipping)";
  loss.log_y = norm.log_y = log_y;
  for (SvgPanel* p : {&loss, &lr, &rate, &norm}) p->x_label = "step";

  for (std::size_t r = 0; r < runs.size(); ++r) {
    const Run& run = runs[r];
    const int color = static_cast<int>(r);
    SvgLine l_loss, l_lr, l_rate, l_norm;
    for (const auto& [step, row] : run.steps) {
      const double x = static_cast<double>(step);
      for (SvgLine* l : {&l_loss, &l_lr, &l_rate, &l_norm}) l->x.push_back(x);
      l_loss.y.push_back(row.loss);
      l_lr.y.push_back(row.lr);
      l_rate.y.push_back(row.rate);
      l_norm.y.push_back(row.grad_norm);
    }
    for (SvgLine* l : {&l_loss, &l_lr, &l_rate, &l_norm}) l->color = color;
    loss.lines.push_back(std::move(l_loss));
    lr.lines.push_back(std::move(l_lr));
    if (run.rate_field == rate_field) rate.lines.push_back(std::move(l_rate));
    norm.lines.push_back(std::move(l_norm));
    if (!run.val_loss.empty()) {
      SvgLine val;
      val.color = color;
      val.dashed = true;
      for (const auto& [step, v] : run.val_loss) {
        val.x.push_back(static_cast<double>(step));
        val.y.push_back(v);
      }
      loss.lines.push_back(std::move(val));
    }
  }
  return fig;
}

}  // namespace

int run_plot(int argc, char** argv) {
  // The logs come first, before any flag.
  std::vector<std::string> logs;
  int first_flag = 0;
  while (first_flag < argc && std::string(argv[first_flag]).rfind("--", 0) != 0 &&
         std::string(argv[first_flag]) != "-h")
    logs.emplace_back(argv[first_flag++]);

  std::string out, title;
  std::vector<std::string> labels;
  int width = 900, height = 600;
  bool log_y = false;
  ArgParser p("plot",
              "Draw training runs from their log.jsonl as one SVG: loss (and validation loss), learning rate,\n"
              "throughput and gradient norm against the step, runs overlaid in colour.\n\n"
              "  llmcc plot LOG... --out FILE.svg [flags]\n\n"
              "Each LOG is a run directory (its log.jsonl is read) or a log.jsonl file; the logs come first.");
  p.add("--out", &out, "the SVG file to write");
  p.add("--title", &title, "a title above the panels");
  p.add("--label", &labels, "one label per LOG, in order (default: each run's directory name)");
  p.add("--log-y", &log_y, "logarithmic y axis for the loss and gradient-norm panels");
  p.add("--width", &width, "width in pixels");
  p.add("--height", &height, "height in pixels");
  p.require("--out");
  p.epilogue(
      "A null value (non-finite in the log) leaves a gap in its line. A malformed line is an error\n"
      "naming the file and line; an incomplete last line (a run still writing) is skipped.\n\n"
      "Examples:\n"
      "  llmcc plot runs/demo --out runs/demo/plot.svg\n"
      "  llmcc plot runs/a runs/b --label \"lr 1e-3\" \"lr 3e-3\" --out compare.svg --log-y");
  if (!p.parse(argc - first_flag, argv + first_flag)) return 0;

  if (logs.empty()) fail(kCmd, "no logs given: llmcc plot LOG... --out FILE.svg (the logs come first)");
  if (!labels.empty() && labels.size() != logs.size())
    fail(kCmd, "--label has " + std::to_string(labels.size()) + " labels for " + std::to_string(logs.size()) +
                   " logs (give one per LOG, in order)");
  if (fs::path(out).extension() != ".svg")
    fail(kCmd, "--out " + out + ": llmcc plot writes SVG, name the file *.svg (rsvg-convert or a browser makes a PNG)");
  if (width < 300 || height < 200 || width > 10000 || height > 10000)
    fail(kCmd, "--width " + std::to_string(width) + " --height " + std::to_string(height) +
                   ": expected from 300x200 to 10000x10000 pixels");

  std::vector<Run> runs;
  for (std::size_t i = 0; i < logs.size(); ++i) {
    std::string path, label;
    locate(logs[i], &path, &label);
    if (!labels.empty()) label = labels[i];
    runs.push_back(read_run(path, label));
  }
  const std::string rate_field = common_rate_field(runs);
  for (const Run& run : runs)
    if (!run.rate_field.empty() && run.rate_field != rate_field)
      std::fprintf(stderr, "%s: warning: %s logs %s, not %s: its throughput is not drawn\n", kCmd, run.path.c_str(),
                   run.rate_field.c_str(), rate_field.c_str());

  SvgFigure fig = figure(runs, title, log_y);
  fig.width = width;
  fig.height = height;
  const std::string svg = render_svg(fig);

  const fs::path out_dir = fs::path(out).parent_path();
  std::error_code ec;
  if (!out_dir.empty() && !fs::is_directory(out_dir, ec))
    fail(kCmd, "cannot write " + out + ": directory " + out_dir.string() + " does not exist");
  std::ofstream f(out, std::ios::binary | std::ios::trunc);
  if (f) f.write(svg.data(), static_cast<std::streamsize>(svg.size()));
  f.close();
  if (!f) fail(kCmd, "cannot write " + out + " (is the disk full or the file read-only?)");
  std::printf("wrote %s (%zu run%s)\n", out.c_str(), runs.size(), runs.size() == 1 ? "" : "s");
  return 0;
}

}  // namespace llmcc::cli
