// The time scrubber under the views: a slider over the run's time span, play
// and pause with a speed, and "Live" to follow a running engine. Every view
// shows the moment it selects, so replaying a recording and watching a live
// run look the same.
#pragma once

#include <QElapsedTimer>
#include <QWidget>

class QComboBox;
class QLabel;
class QPushButton;
class QSlider;
class QTimer;

namespace kvscope::ui {

class ReplayBar : public QWidget {
    Q_OBJECT
public:
    explicit ReplayBar(QWidget* parent = nullptr);

    // The span the slider covers (host-clock ns); keeps the time inside it.
    void set_range(qint64 begin_ns, qint64 end_ns);
    qint64 time_ns() const { return time_ns_; }
    // Moves the cursor without emitting time_changed (the window's own moves).
    void set_time_ns(qint64 t_ns);
    bool following() const { return following_; }
    void set_following(bool following);
    bool playing() const;
    void set_playing(bool playing);
    double speed() const;
    void set_speed(double speed); // picks the nearest offered speed

    QSlider* slider() const { return slider_; }
    QPushButton* play_button() const { return play_; }
    QPushButton* live_button() const { return live_; }

signals:
    void time_changed(qint64 t_ns);      // the user (or playback) moved the cursor
    void following_changed(bool follow); // "Live" toggled

private:
    void advance();
    void move_to(qint64 t_ns, bool notify);
    void update_label();

    QPushButton* play_ = nullptr;
    QComboBox* speed_ = nullptr;
    QSlider* slider_ = nullptr;
    QLabel* label_ = nullptr;
    QPushButton* live_ = nullptr;
    QTimer* timer_ = nullptr;
    QElapsedTimer clock_;
    qint64 begin_ns_ = 0;
    qint64 end_ns_ = 0;
    qint64 time_ns_ = 0;
    bool following_ = false;
};

} // namespace kvscope::ui
