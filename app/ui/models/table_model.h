// What the app's tables share: a header and an alignment per column (numbers
// right, text left; TableColumns, which the prefix tree uses too), rows held
// by value, and three roles every table answers the same way (the cell's
// text, a raw value to sort by, its alignment). A table says what its cells
// hold; any other role (tooltips, colours, fonts) it answers in cell_role().
#pragma once

#include <vector>

#include <QAbstractTableModel>
#include <QString>

namespace kvscope::ui {

struct TableColumn {
    QString header;
    bool numeric = true; // right-aligned
};

// A model's columns: their count, header data and cell alignment.
class TableColumns {
public:
    explicit TableColumns(std::vector<TableColumn> columns)
        : columns_(std::move(columns)) {}

    int count() const { return static_cast<int>(columns_.size()); }

    // As an int: what Qt 6.4's delegates and header views read back.
    int alignment(int column) const {
        const bool numeric = columns_[static_cast<std::size_t>(column)].numeric;
        return static_cast<int>((numeric ? Qt::AlignRight : Qt::AlignLeft) | Qt::AlignVCenter);
    }

    QVariant header_data(int section, Qt::Orientation orientation, int role) const {
        if (orientation != Qt::Horizontal || section < 0 || section >= count()) {
            return {};
        }
        if (role == Qt::TextAlignmentRole) {
            return alignment(section);
        }
        return role == Qt::DisplayRole
                   ? QVariant(columns_[static_cast<std::size_t>(section)].header)
                   : QVariant();
    }

private:
    std::vector<TableColumn> columns_;
};

template <class Row>
class TableModel : public QAbstractTableModel {
public:
    // Raw values (numbers, not text) for sorting: use with a proxy's sortRole.
    static constexpr int SortRole = Qt::UserRole;

    const std::vector<Row>& rows() const { return rows_; }

    int rowCount(const QModelIndex& parent = {}) const override {
        return parent.isValid() ? 0 : static_cast<int>(rows_.size());
    }
    int columnCount(const QModelIndex& parent = {}) const override {
        return parent.isValid() ? 0 : columns_.count();
    }

    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override {
        if (!checkIndex(index,
                        CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) {
            return {};
        }
        const Row& row = rows_[static_cast<std::size_t>(index.row())];
        switch (role) {
        case Qt::DisplayRole:
            return display(row, index.column());
        case SortRole:
            return sort_value(row, index.column());
        case Qt::TextAlignmentRole:
            return columns_.alignment(index.column());
        default:
            return cell_role(row, index.column(), role);
        }
    }

    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override {
        return columns_.header_data(section, orientation, role);
    }

protected:
    TableModel(std::vector<TableColumn> columns, QObject* parent)
        : QAbstractTableModel(parent)
        , columns_(std::move(columns)) {}

    virtual QString display(const Row& row, int column) const = 0;
    virtual QVariant sort_value(const Row& row, int column) const = 0;
    virtual QVariant cell_role(const Row&, int, int) const { return {}; }

    // All rows replaced at once (a reset: selections and scroll go).
    void reset_rows(std::vector<Row> rows) {
        beginResetModel();
        rows_ = std::move(rows);
        endResetModel();
    }

    std::vector<Row> rows_;

private:
    TableColumns columns_;
};

} // namespace kvscope::ui
