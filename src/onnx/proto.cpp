#include "src/onnx/proto.h"

#include "src/support/check.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <vector>

namespace kiln::onnx_import {

std::string read_file(const std::string& path, const char* what) {
    std::error_code ec;
    KILN_USER_CHECK(!std::filesystem::is_directory(path, ec), what << ": '" << path << "' is a directory, not a file");
    std::ifstream in(path, std::ios::binary);
    KILN_USER_CHECK(in.good(), what << ": cannot open '" << path << "'");
    std::ostringstream ss;
    ss << in.rdbuf();
    KILN_USER_CHECK(!in.bad(), what << ": error while reading '" << path << "'");
    return ss.str();
}

pb::ModelProto parse_model(std::string_view bytes) {
    KILN_USER_CHECK(bytes.size() < static_cast<std::size_t>(std::numeric_limits<int>::max()),
                    "ONNX model: " << bytes.size() << " bytes is more than protobuf can parse (2 GiB)");
    pb::ModelProto model;
    KILN_USER_CHECK(model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())),
                    "ONNX model: the data (" << bytes.size()
                                             << " bytes) is not a valid ModelProto (truncated, or not an ONNX file)");
    KILN_USER_CHECK(model.has_graph(), "ONNX model: it has no graph");
    KILN_USER_CHECK(model.ir_version() >= 3,
                    "ONNX model: ir_version " << model.ir_version() << " is not supported (expected >= 3)");
    default_opset(model);  // checks that there is one
    return model;
}

std::int64_t default_opset(const pb::ModelProto& model) {
    for (const auto& o : model.opset_import())
        if (o.domain().empty() || o.domain() == "ai.onnx") {
            KILN_USER_CHECK(o.version() >= 1 && o.version() < 1000,
                            "ONNX model: opset version " << o.version() << " of the default domain is not valid");
            KILN_USER_CHECK(o.version() <= kNewestOpset,
                            "ONNX model: opset " << o.version() << " of the default domain is newer than Kiln knows (7 to "
                                                 << kNewestOpset << "): its ops may mean something else there");
            return o.version();
        }
    KILN_USER_ERROR("ONNX model: it imports no opset of the default domain (ai.onnx)");
}

std::optional<DType> dtype_from_onnx(std::int64_t elem_type) {
    switch (elem_type) {
    case pb::TensorProto::FLOAT: return DType::f32;
    case pb::TensorProto::DOUBLE: return DType::f64;
    case pb::TensorProto::FLOAT16: return DType::f16;
    case pb::TensorProto::BFLOAT16: return DType::bf16;
    case pb::TensorProto::INT8: return DType::i8;
    case pb::TensorProto::UINT8: return DType::u8;
    case pb::TensorProto::INT32: return DType::i32;
    case pb::TensorProto::INT64: return DType::i64;
    case pb::TensorProto::BOOL: return DType::boolean;
    default: return std::nullopt;
    }
}

std::string onnx_type_name(std::int64_t elem_type) {
    if (elem_type >= 0 && elem_type <= std::numeric_limits<int>::max() &&
        pb::TensorProto_DataType_IsValid(static_cast<int>(elem_type)))
        return pb::TensorProto_DataType_Name(static_cast<pb::TensorProto_DataType>(elem_type));
    return "element type " + std::to_string(elem_type);
}

namespace {

// Copies `n` values of a repeated field into the tensor's elements, converting each.
template <class Dst, class Field> void copy_field(const Field& f, void* out) {
    auto* d = static_cast<Dst*>(out);
    for (int i = 0; i < f.size(); ++i) {
        if constexpr (std::is_same_v<Dst, Half> || std::is_same_v<Dst, BFloat16>)
            d[i].bits = static_cast<std::uint16_t>(f.Get(i));  // the bits, in int32_data
        else
            d[i] = static_cast<Dst>(f.Get(i));
    }
}

}  // namespace

Tensor tensor_from_proto(const pb::TensorProto& t, const std::string& where) {
    auto dt = dtype_from_onnx(t.data_type());
    KILN_USER_CHECK(dt.has_value(), where << ": element type " << onnx_type_name(t.data_type())
                                          << " is not supported (Kiln has f32, f64, f16, bf16, i8, u8, i32, i64, bool)");
    KILN_USER_CHECK(t.data_location() != pb::TensorProto::EXTERNAL,
                    where << ": tensors with external data are not supported");
    KILN_USER_CHECK(!t.has_segment(), where << ": segmented tensors are not supported");
    Shape shape;
    std::int64_t numel = 1;
    constexpr std::int64_t kMaxElements = std::int64_t{1} << 34;
    std::int64_t extent = 1;  // the product of the dims counted as at least 1 (strides stay in range)
    for (std::int64_t d : t.dims()) {
        KILN_USER_CHECK(d >= 0, where << ": dims must be >= 0, got " << d);
        KILN_USER_CHECK(extent <= kMaxElements / std::max<std::int64_t>(d, 1), where << ": too many elements");
        extent *= std::max<std::int64_t>(d, 1);
        numel *= d;
        shape.push_back(d);
    }
    const std::size_t esize = dtype_size(*dt);
    // Sizes are checked before anything is allocated: a file cannot make Kiln allocate
    // more than the data it holds.
    if (t.has_raw_data()) {
        const std::string& raw = t.raw_data();
        KILN_USER_CHECK(raw.size() == static_cast<std::size_t>(numel) * esize,
                        where << ": raw_data holds " << raw.size() << " bytes, expected " << numel * static_cast<std::int64_t>(esize)
                              << " for " << shape_to_string(shape) << " " << dtype_name(*dt));
        Tensor out = Tensor::zeros(shape, *dt);
        if (numel > 0) std::memcpy(out.data(), raw.data(), raw.size());  // ONNX raw data is little-endian, as is x86
        if (*dt == DType::boolean && numel > 0) {  // Kiln's bools are 0 or 1
            auto* b = static_cast<std::uint8_t*>(out.data());
            for (std::int64_t i = 0; i < numel; ++i) b[i] = b[i] != 0 ? 1 : 0;
        }
        return out;
    }
    int count = 0;
    const char* field = "int32_data";
    switch (t.data_type()) {
    case pb::TensorProto::FLOAT: count = t.float_data_size(); field = "float_data"; break;
    case pb::TensorProto::DOUBLE: count = t.double_data_size(); field = "double_data"; break;
    case pb::TensorProto::INT64: count = t.int64_data_size(); field = "int64_data"; break;
    default: count = t.int32_data_size(); break;
    }
    KILN_USER_CHECK(count == numel, where << ": " << field << " holds " << count << " values, expected " << numel
                                          << " for " << shape_to_string(shape));
    Tensor out = Tensor::zeros(shape, *dt);
    if (numel == 0) return out;
    void* p = out.data();
    switch (t.data_type()) {
    case pb::TensorProto::FLOAT: copy_field<float>(t.float_data(), p); break;
    case pb::TensorProto::DOUBLE: copy_field<double>(t.double_data(), p); break;
    case pb::TensorProto::INT64: copy_field<std::int64_t>(t.int64_data(), p); break;
    case pb::TensorProto::INT32: copy_field<std::int32_t>(t.int32_data(), p); break;
    case pb::TensorProto::INT8: copy_field<std::int8_t>(t.int32_data(), p); break;
    case pb::TensorProto::UINT8: copy_field<std::uint8_t>(t.int32_data(), p); break;
    case pb::TensorProto::BOOL: {
        auto* d = static_cast<std::uint8_t*>(p);
        for (int i = 0; i < t.int32_data_size(); ++i) d[i] = t.int32_data(i) != 0 ? 1 : 0;
        break;
    }
    case pb::TensorProto::FLOAT16: copy_field<Half>(t.int32_data(), p); break;
    case pb::TensorProto::BFLOAT16: copy_field<BFloat16>(t.int32_data(), p); break;
    default: KILN_UNREACHABLE("dtype_from_onnx admitted " << t.data_type());
    }
    return out;
}

}  // namespace kiln::onnx_import
