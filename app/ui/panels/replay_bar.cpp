#include "app/ui/panels/replay_bar.h"

#include <algorithm>
#include <cmath>

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSlider>
#include <QTimer>

namespace kvscope::ui {
namespace {

constexpr int kSliderSteps = 10000;

} // namespace

ReplayBar::ReplayBar(QWidget* parent)
    : QWidget(parent) {
    setObjectName("replayBar");
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(4, 2, 4, 2);
    play_ = new QPushButton(tr("Play"));
    play_->setObjectName("playButton");
    play_->setCheckable(true);
    play_->setToolTip(tr("Replay from the cursor at the chosen speed (Space)"));
    play_->setShortcut(Qt::Key_Space);
    speed_ = new QComboBox;
    speed_->setObjectName("speedCombo");
    for (const double s : {0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 10.0}) {
        speed_->addItem(QString::number(s) + QString::fromUtf8("×"), s);
    }
    speed_->setCurrentIndex(3);
    slider_ = new QSlider(Qt::Horizontal);
    slider_->setObjectName("timeSlider");
    slider_->setRange(0, kSliderSteps);
    slider_->setToolTip(tr("Drag to see any moment of the run"));
    label_ = new QLabel;
    label_->setMinimumWidth(150);
    label_->setObjectName("timeLabel");
    live_ = new QPushButton(tr("Live"));
    live_->setObjectName("liveButton");
    live_->setCheckable(true);
    live_->setToolTip(tr("Follow the running engine"));
    layout->addWidget(play_);
    layout->addWidget(speed_);
    layout->addWidget(slider_, 1);
    layout->addWidget(label_);
    layout->addWidget(live_);

    timer_ = new QTimer(this);
    timer_->setInterval(33);
    connect(timer_, &QTimer::timeout, this, &ReplayBar::advance);
    connect(play_, &QPushButton::toggled, this, &ReplayBar::set_playing);
    connect(slider_, &QSlider::valueChanged, this, [this](int value) {
        const double share = static_cast<double>(value) / kSliderSteps;
        set_following(false);
        move_to(begin_ns_ + static_cast<qint64>(share * static_cast<double>(end_ns_ - begin_ns_)),
                true);
    });
    connect(live_, &QPushButton::toggled, this, [this](bool on) {
        set_following(on);
        emit following_changed(on);
    });
    update_label();
}

void ReplayBar::set_range(qint64 begin_ns, qint64 end_ns) {
    begin_ns_ = begin_ns;
    end_ns_ = std::max(begin_ns, end_ns);
    if (following_) {
        time_ns_ = end_ns_;
    }
    move_to(std::clamp(time_ns_, begin_ns_, end_ns_), false);
}

void ReplayBar::set_time_ns(qint64 t_ns) {
    move_to(std::clamp(t_ns, begin_ns_, end_ns_), false);
}

void ReplayBar::move_to(qint64 t_ns, bool notify) {
    time_ns_ = t_ns;
    const double span = static_cast<double>(std::max<qint64>(1, end_ns_ - begin_ns_));
    {
        const QSignalBlocker block(slider_);
        slider_->setValue(static_cast<int>(
            std::lround(static_cast<double>(t_ns - begin_ns_) / span * kSliderSteps)));
    }
    update_label();
    if (notify) {
        emit time_changed(time_ns_);
    }
}

void ReplayBar::set_following(bool following) {
    if (following_ == following) {
        return;
    }
    following_ = following;
    {
        const QSignalBlocker block(live_);
        live_->setChecked(following);
    }
    if (following) {
        set_playing(false);
        move_to(end_ns_, false);
    }
}

bool ReplayBar::playing() const {
    return timer_->isActive();
}

void ReplayBar::set_playing(bool playing) {
    {
        const QSignalBlocker block(play_);
        play_->setChecked(playing);
    }
    play_->setText(playing ? tr("Pause") : tr("Play"));
    if (playing == timer_->isActive()) {
        return;
    }
    if (playing) {
        set_following(false);
        if (time_ns_ >= end_ns_) {
            move_to(begin_ns_, true); // play again from the start
        }
        clock_.start();
        timer_->start();
    } else {
        timer_->stop();
    }
}

double ReplayBar::speed() const {
    return speed_->currentData().toDouble();
}

void ReplayBar::set_speed(double speed) {
    int best = 0;
    for (int i = 1; i < speed_->count(); ++i) {
        if (std::abs(speed_->itemData(i).toDouble() - speed) <
            std::abs(speed_->itemData(best).toDouble() - speed)) {
            best = i;
        }
    }
    speed_->setCurrentIndex(best);
}

// Playback follows the wall clock, not the timer's ticks, so a slow repaint
// makes the replay choppier, never slower.
void ReplayBar::advance() {
    const qint64 elapsed_ns = clock_.nsecsElapsed();
    clock_.restart();
    const auto step = static_cast<qint64>(static_cast<double>(elapsed_ns) * speed());
    const qint64 next = std::min(end_ns_, time_ns_ + step);
    move_to(next, true);
    if (next >= end_ns_) {
        set_playing(false);
    }
}

void ReplayBar::update_label() {
    const double now = static_cast<double>(time_ns_ - begin_ns_) * 1e-9;
    const double total = static_cast<double>(end_ns_ - begin_ns_) * 1e-9;
    label_->setText(tr("%1 s of %2 s").arg(now, 0, 'f', 3).arg(total, 0, 'f', 3));
}

} // namespace kvscope::ui
