// accel's "ccl" backend for torch.distributed: oneCCL's public C++ API (oneapi/ccl.hpp) behind c10d::Backend,
// for CPU tensors. Registered from Python by accel_ccl/__init__.py.
//
// What DDP and chapter 9's pipeline use, and no more: allreduce (SUM, PRODUCT, MIN, MAX on float32, float64,
// bfloat16, float16 and the integer types), broadcast, allgather of equal sizes (and its flat form), barrier.
// Anything else is a c10::Error that names the operation or dtype.
//
// Asynchronous, as Gloo's: a collective is posted to oneCCL (in call order, which every rank shares) and
// returns at once with its Work; a progress thread of the backend polls the posted events, copies results
// back where a staging buffer stood in (a non-contiguous tensor, allgather's list), and completes the Work
// and its future. So DDP's bucket all-reduces run while the backward pass goes on, and `async_op=True`
// means what it says. A posted collective keeps its tensors alive until it completes.
//
// Failure: a collective not complete within its timeout (the call's, else the group's) fails its Work with
// DistBackendError, and so does one whose event raises. The group is then broken: every collective still
// queued fails with it, and every later call is refused in one line, since the ranks' order of collectives
// can no longer be matched. A failed collective's event and tensors are left alive (leaked on purpose): oneCCL
// may still write into those buffers, and an incomplete event's destructor waits for it, forever when the
// peer is gone. The rank is expected to end (Session.abort); nothing tears oneCCL down.
//
// Bootstrap: rank 0 creates oneCCL's main key-value store and publishes its address in the process group's
// c10d Store; every other rank reads it (Store::get waits at most the group's timeout) and attaches to it.
//
// oneCCL's own worker thread may throw where no caller can catch it (a send to a peer that died mid-step:
// "SEND entry failed"), which ends the process through std::terminate. `on_uncaught` installs a terminate
// handler that writes the rank's one line, with the exception's message, and exits with the run-failed code,
// instead of libstdc++'s "terminate called after throwing" and a core dump.
#include <torch/extension.h>
#include <pybind11/chrono.h>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <ATen/core/ivalue.h>
#include <ATen/core/jit_type.h>

#include <oneapi/ccl.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <unistd.h>

namespace accel_ccl {

namespace {

constexpr const char* kBackendName = "ccl";
constexpr const char* kKvsKey = "accel_ccl/kvs_address";

std::once_flag g_ccl_init_once;

void ensureCclInit() {
  std::call_once(g_ccl_init_once, [] { ccl::init(); });
}

// The one line for an uncaught C++ exception (set from Python, which owns the wording): before + the
// exception's message + after. Written once, however many threads terminate.
std::string g_uncaught_before;
std::string g_uncaught_after;
int g_uncaught_code = 1;
std::atomic_flag g_uncaught_said = ATOMIC_FLAG_INIT;

[[noreturn]] void sayUncaughtAndExit() {
  if (!g_uncaught_said.test_and_set()) {
    std::string what = "not a std::exception";
    if (auto current = std::current_exception()) {
      try {
        std::rethrow_exception(current);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
    }
    std::string line = g_uncaught_before + what + g_uncaught_after + "\n";
    auto written = ::write(STDERR_FILENO, line.data(), line.size());
    (void)written;
    ::_exit(g_uncaught_code);
  }
  for (;;) {  // another thread is writing the line and will exit the process
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

// dtype mapping used for reductions; the reduction must run on the real type.
ccl::datatype reduceDtype(at::ScalarType t, const char* opName) {
  switch (t) {
    case at::kFloat:
      return ccl::datatype::float32;
    case at::kDouble:
      return ccl::datatype::float64;
    case at::kBFloat16:
      return ccl::datatype::bfloat16;
    case at::kHalf:
      return ccl::datatype::float16;
    case at::kInt:
      return ccl::datatype::int32;
    case at::kLong:
      return ccl::datatype::int64;
    case at::kChar:
      return ccl::datatype::int8;
    case at::kByte:
      return ccl::datatype::uint8;
    default:
      TORCH_CHECK(
          false,
          "ccl backend: ",
          opName,
          " does not support dtype ",
          c10::toString(t));
  }
}

ccl::reduction reduceOp(const c10d::ReduceOp& op, const char* opName) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return ccl::reduction::sum;
    case c10d::ReduceOp::PRODUCT:
      return ccl::reduction::prod;
    case c10d::ReduceOp::MIN:
      return ccl::reduction::min;
    case c10d::ReduceOp::MAX:
      return ccl::reduction::max;
    default: {
      static const char* names[] = {"SUM", "AVG", "PRODUCT", "MIN", "MAX",
                                    "BAND", "BOR", "BXOR", "PREMUL_SUM"};
      int i = static_cast<int>(op.op_);
      TORCH_CHECK(
          false,
          "ccl backend: ",
          opName,
          " does not support ReduceOp.",
          (i >= 0 && i < 9) ? names[i] : "UNKNOWN",
          " (supported: SUM, PRODUCT, MIN, MAX)");
    }
  }
}

void checkCpuDense(const at::Tensor& t, const char* opName) {
  TORCH_CHECK(
      t.device().is_cpu(),
      "ccl backend: ",
      opName,
      " supports only CPU tensors, got a tensor on ",
      t.device());
  TORCH_CHECK(
      t.layout() == at::kStrided,
      "ccl backend: ",
      opName,
      " supports only dense (strided) tensors");
}

void checkSingle(const std::vector<at::Tensor>& ts, const char* opName) {
  TORCH_CHECK(
      ts.size() == 1,
      "ccl backend: ",
      opName,
      " expects exactly one tensor per call, got ",
      ts.size());
}

// A posted collective's Work: completed (or failed) by the backend's progress thread. wait() is the base's
// (it waits for completion and rethrows the failure); the future carries the output tensors, as DDP expects.
class AsyncWork : public c10d::Work {
 public:
  AsyncWork(int rank, c10d::OpType opType, std::vector<at::Tensor> outputs)
      : c10d::Work(rank, opType),
        outputs_(std::move(outputs)),
        future_(c10::make_intrusive<at::ivalue::Future>(
            c10::ListType::create(c10::TensorType::get()))) {}

  std::vector<at::Tensor> result() override {
    return outputs_;
  }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    return future_;
  }

  // Called once, by the progress thread (or by post() when posting itself failed).
  void complete(std::exception_ptr error) {
    finish(error);
    if (error) {
      future_->setError(error);
    } else {
      future_->markCompleted(c10::IValue(outputs_));
    }
  }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

std::exception_ptr distError(const std::string& message) {
  try {
    C10_THROW_ERROR(DistBackendError, message);
  } catch (...) {
    return std::current_exception();
  }
}

// One posted collective: its event, what must outlive it, the copy-back to run once it completed.
struct Pending {
  ccl::event event;
  std::vector<at::Tensor> keep;
  std::function<void()> finish;
  c10::intrusive_ptr<AsyncWork> work;
  std::chrono::steady_clock::time_point deadline;
  const char* opName;
  std::chrono::milliseconds timeout;
};

constexpr auto kPoll = std::chrono::microseconds(50);  // between two looks at the posted events

} // namespace

class BackendCCL : public c10d::Backend {
 public:
  BackendCCL(
      const c10::intrusive_ptr<c10d::Store>& store,
      int rank,
      int size,
      std::chrono::milliseconds timeout)
      : c10d::Backend(rank, size), store_(store), timeout_(timeout) {
    ensureCclInit();
    std::shared_ptr<ccl::kvs> kvs;
    if (rank == 0) {
      kvs = ccl::create_main_kvs();
      auto addr = kvs->get_address();
      std::vector<uint8_t> bytes(addr.begin(), addr.end());
      store_->set(kKvsKey, bytes);
    } else {
      // Blocks until rank 0 published the address (or the store times out).
      std::vector<uint8_t> bytes = store_->get(kKvsKey);
      ccl::kvs::address_type addr{};
      TORCH_CHECK(
          bytes.size() == addr.size(),
          "ccl backend: bad KVS address size in store: ",
          bytes.size(),
          " (expected ",
          addr.size(),
          ")");
      std::memcpy(addr.data(), bytes.data(), addr.size());
      kvs = ccl::create_kvs(addr);
    }
    comm_ = std::make_unique<ccl::communicator>(
        ccl::create_communicator(size, rank, kvs));
    kvs_ = std::move(kvs);
    progress_ = std::thread([this] { progressLoop(); });
  }

  // Waits for what is still posted: it completes, or fails at its deadline (a failed one is left alive).
  ~BackendCCL() override {
    {
      std::lock_guard<std::mutex> lk(queueMu_);
      stop_ = true;
    }
    queueCv_.notify_all();
    if (progress_.joinable()) {
      progress_.join();
    }
  }

  const std::string getBackendName() const override {
    return kBackendName;
  }

  c10::intrusive_ptr<c10d::Work> allreduce(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceOptions& opts) override {
    constexpr const char* op = "allreduce";
    checkSingle(tensors, op);
    at::Tensor t = tensors[0];
    checkCpuDense(t, op);
    auto dt = reduceDtype(t.scalar_type(), op);
    auto red = reduceOp(opts.reduceOp, op);
    at::Tensor buf = t.is_contiguous() ? t : t.contiguous();
    return post(op, c10d::OpType::ALLREDUCE, opts.timeout, tensors, {t, buf}, copyBack(buf, t), [&] {
      return ccl::allreduce(buf.data_ptr(), buf.data_ptr(), buf.numel(), dt, red, *comm_);
    });
  }

  c10::intrusive_ptr<c10d::Work> broadcast(
      std::vector<at::Tensor>& tensors,
      const c10d::BroadcastOptions& opts) override {
    constexpr const char* op = "broadcast";
    checkSingle(tensors, op);
    TORCH_CHECK(
        opts.rootTensor == 0, "ccl backend: broadcast supports rootTensor=0 only");
    TORCH_CHECK(
        opts.rootRank >= 0 && opts.rootRank < size_,
        "ccl backend: broadcast root rank out of range: ",
        opts.rootRank);
    at::Tensor t = tensors[0];
    checkCpuDense(t, op);
    at::Tensor buf = t.is_contiguous() ? t : t.contiguous();
    // Broadcast moves bytes; any dtype is fine.
    const int root = static_cast<int>(opts.rootRank);
    return post(op, c10d::OpType::BROADCAST, opts.timeout, tensors, {t, buf}, copyBack(buf, t), [&] {
      return ccl::broadcast(buf.data_ptr(), buf.nbytes(), ccl::datatype::uint8, root, *comm_);
    });
  }

  c10::intrusive_ptr<c10d::Work> allgather(
      std::vector<std::vector<at::Tensor>>& outputTensors,
      std::vector<at::Tensor>& inputTensors,
      const c10d::AllgatherOptions& opts) override {
    constexpr const char* op = "allgather";
    checkSingle(inputTensors, op);
    TORCH_CHECK(
        outputTensors.size() == 1,
        "ccl backend: allgather expects one output tensor list, got ",
        outputTensors.size());
    auto& outs = outputTensors[0];
    const at::Tensor& in = inputTensors[0];
    checkCpuDense(in, op);
    TORCH_CHECK(
        static_cast<int>(outs.size()) == size_,
        "ccl backend: allgather output list must have world_size (",
        size_,
        ") tensors, got ",
        outs.size());
    for (const auto& o : outs) {
      checkCpuDense(o, op);
      TORCH_CHECK(
          o.numel() == in.numel() && o.scalar_type() == in.scalar_type(),
          "ccl backend: allgather supports only equal-size, same-dtype tensors "
          "(input numel ",
          in.numel(),
          " dtype ",
          c10::toString(in.scalar_type()),
          "; output numel ",
          o.numel(),
          " dtype ",
          c10::toString(o.scalar_type()),
          ")");
    }
    at::Tensor src = in.contiguous();
    at::Tensor flat = at::empty({static_cast<int64_t>(size_) * in.numel()}, in.options());
    std::vector<at::Tensor> keep(outs.begin(), outs.end());
    keep.push_back(src);
    keep.push_back(flat);
    const int64_t n = in.numel();
    std::vector<at::Tensor> targets(outs.begin(), outs.end());
    auto scatter = [flat, targets, n]() {
      for (size_t r = 0; r < targets.size(); ++r) {
        at::Tensor out = targets[r];
        out.copy_(flat.narrow(0, static_cast<int64_t>(r) * n, n).view(out.sizes()));
      }
    };
    return gatherBytes(op, c10d::OpType::ALLGATHER, opts.timeout, src, flat, targets, std::move(keep), scatter);
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor& outputBuffer,
      at::Tensor& inputBuffer,
      const c10d::AllgatherOptions& opts) override {
    constexpr const char* op = "_allgather_base";
    checkCpuDense(inputBuffer, op);
    checkCpuDense(outputBuffer, op);
    TORCH_CHECK(
        outputBuffer.scalar_type() == inputBuffer.scalar_type(),
        "ccl backend: _allgather_base dtype mismatch");
    TORCH_CHECK(
        outputBuffer.numel() == inputBuffer.numel() * size_,
        "ccl backend: _allgather_base output must have world_size * input numel elements");
    at::Tensor src = inputBuffer.contiguous();
    at::Tensor out = outputBuffer;
    at::Tensor dst = out.is_contiguous() ? out : out.contiguous();
    return gatherBytes(op, c10d::OpType::_ALLGATHER_BASE, opts.timeout, src, dst, {out}, {src, dst, out},
                       copyBack(dst, out));
  }

  c10::intrusive_ptr<c10d::Work> barrier(
      const c10d::BarrierOptions& opts) override {
    return post("barrier", c10d::OpType::BARRIER, opts.timeout, {}, {}, nullptr, [&] {
      return ccl::barrier(*comm_);
    });
  }

  // Factory used from Python: creator_fn(store, rank, world_size, timeout).
  static c10::intrusive_ptr<c10d::Backend> create(
      const c10::intrusive_ptr<c10d::Store>& store,
      int rank,
      int size,
      std::chrono::milliseconds timeout) {
    return c10::make_intrusive<BackendCCL>(store, rank, size, timeout);
  }

 private:
  // The copy-back of a staging buffer into the caller's tensor once the collective completed, or nothing
  // when the collective wrote the tensor itself.
  static std::function<void()> copyBack(const at::Tensor& staged, const at::Tensor& target) {
    if (staged.is_same(target)) {
      return nullptr;
    }
    return [staged, target]() mutable { target.copy_(staged); };
  }

  // Post a collective (`start` returns its ccl::event) and hand back its Work; the progress thread completes
  // it. Posting is serialized, so every rank posts in its call order; a broken group refuses the call.
  template <typename Start>
  c10::intrusive_ptr<c10d::Work> post(
      const char* opName,
      c10d::OpType type,
      std::chrono::milliseconds timeout,
      std::vector<at::Tensor> outputs,
      std::vector<at::Tensor> keep,
      std::function<void()> finish,
      Start&& start) {
    if (timeout == c10d::kUnsetTimeout) {
      timeout = timeout_;
    }
    auto work = c10::make_intrusive<AsyncWork>(rank_, type, std::move(outputs));
    std::lock_guard<std::mutex> posting(mu_);
    {
      std::lock_guard<std::mutex> lk(queueMu_);
      if (!broken_.empty()) {
        C10_THROW_ERROR(
            DistBackendError,
            c10::str("ccl backend: ", opName, " refused: this process group is broken (", broken_,
                     "); no later collective runs, start the job again"));
      }
    }
    std::unique_ptr<Pending> pending;
    try {
      pending.reset(new Pending{start(), std::move(keep), std::move(finish), work,
                                std::chrono::steady_clock::now() + timeout, opName, timeout});
    } catch (const ccl::exception& e) {
      TORCH_CHECK(false, "ccl backend: ", opName, " failed: ", e.what());
    }
    {
      std::lock_guard<std::mutex> lk(queueMu_);
      queue_.push_back(std::move(pending));
    }
    queueCv_.notify_one();
    return work;
  }

  // The progress thread: looks at every posted event every kPoll, completes what completed (copy-back,
  // then the Work and its future, outside the lock: a future's callbacks may post again), fails what
  // passed its deadline or raised, and then everything queued behind it (the group is broken).
  void progressLoop() {
    std::unique_lock<std::mutex> lk(queueMu_);
    for (;;) {
      queueCv_.wait(lk, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) {
        return;  // stopping, nothing posted
      }
      std::vector<std::unique_ptr<Pending>> done;
      std::vector<std::pair<std::unique_ptr<Pending>, std::exception_ptr>> failed;
      const auto now = std::chrono::steady_clock::now();
      for (auto it = queue_.begin(); it != queue_.end();) {
        Pending& p = **it;
        bool complete = false;
        std::string why;
        try {
          complete = p.event.test();
        } catch (const ccl::exception& e) {
          why = c10::str("ccl backend: ", p.opName, " failed: ", e.what());
        }
        if (!complete && why.empty() && now > p.deadline) {
          why = c10::str("ccl backend: ", p.opName, " did not complete within ", p.timeout.count() / 1000.0,
                         " s: a peer rank is gone or stopped answering");
        }
        if (complete) {
          done.push_back(std::move(*it));
          it = queue_.erase(it);
        } else if (!why.empty()) {
          if (broken_.empty()) {
            broken_ = why;
          }
          failed.emplace_back(std::move(*it), distError(why));
          it = queue_.erase(it);
        } else {
          ++it;
        }
      }
      if (!broken_.empty()) {
        for (auto& p : queue_) {
          failed.emplace_back(std::move(p), distError(c10::str(
              "ccl backend: ", p->opName, " not run: the group broke before it (", broken_, ")")));
        }
        queue_.clear();
      }
      const bool waiting = !queue_.empty();
      lk.unlock();
      for (auto& p : done) {
        std::exception_ptr error;
        try {
          if (p->finish) {
            p->finish();
          }
        } catch (...) {
          error = std::current_exception();
        }
        p->work->complete(error);
      }
      done.clear();  // completed events end here, outside the lock
      for (auto& item : failed) {
        item.first->work->complete(item.second);
        item.first.release();  // left alive on purpose: see the file's header
      }
      if (waiting) {
        std::this_thread::sleep_for(kPoll);
      }
      lk.lock();
    }
  }

  // Equal-size allgather of contiguous src into contiguous dst (size_ * src), then `finish`.
  c10::intrusive_ptr<c10d::Work> gatherBytes(
      const char* opName,
      c10d::OpType type,
      std::chrono::milliseconds timeout,
      const at::Tensor& src,
      const at::Tensor& dst,
      std::vector<at::Tensor> outputs,
      std::vector<at::Tensor> keep,
      std::function<void()> finish) {
    const size_t nbytes = src.nbytes();
    std::vector<size_t> counts(size_, nbytes);
    return post(opName, type, timeout, std::move(outputs), std::move(keep), std::move(finish), [&] {
      return ccl::allgatherv(src.data_ptr(), nbytes, dst.data_ptr(), counts, ccl::datatype::uint8, *comm_);
    });
  }

  c10::intrusive_ptr<c10d::Store> store_;
  std::chrono::milliseconds timeout_;  // the group's: how long any collective may wait for its peers
  std::shared_ptr<ccl::kvs> kvs_;
  std::unique_ptr<ccl::communicator> comm_;
  std::mutex mu_;  // posting: one collective at a time, in call order
  std::mutex queueMu_;  // the posted collectives and the broken state
  std::condition_variable queueCv_;
  std::deque<std::unique_ptr<Pending>> queue_;
  std::string broken_;  // the first failure; non-empty: every later call is refused
  bool stop_ = false;
  std::thread progress_;  // last: started when everything above exists
};

} // namespace accel_ccl

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "accel's oneCCL backend for torch.distributed (CPU)";
  m.def(
      "create_backend",
      &accel_ccl::BackendCCL::create,
      py::arg("store"),
      py::arg("rank"),
      py::arg("world_size"),
      py::arg("timeout"),
      // Construction blocks on the store / KVS handshake: release the GIL.
      py::call_guard<py::gil_scoped_release>());
  m.attr("WORK") = "async";  // records say how a collective completes (dist.ccl.work)
  m.def(
      "on_uncaught",
      [](std::string before, std::string after, int code) {
        accel_ccl::g_uncaught_before = std::move(before);
        accel_ccl::g_uncaught_after = std::move(after);
        accel_ccl::g_uncaught_code = code;
        std::set_terminate(accel_ccl::sayUncaughtAndExit);
      },
      py::arg("before"),
      py::arg("after"),
      py::arg("code"));
  // For tests: an exception no caller can catch, thrown in a thread of its own, as oneCCL's worker does.
  m.def("_throw_in_a_thread", [](std::string message) {
    std::thread([message] { throw std::runtime_error(message); }).join();
  });
  m.def("oneccl_version", [] {
    auto v = ccl::get_library_version();
    return std::string(v.full);
  });
}
