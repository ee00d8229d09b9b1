//! Spending limits over all beads: per UTC day and in total, beside each bead's own budget.
//!
//! The agents report what each attempt cost; the journal keeps it ([`Spending`], folded from
//! `step.finished`). Once a day's or the total's spending reaches its limit, no agent attempt
//! starts (gates and merges cost nothing and go on) until the next UTC day, a higher limit in
//! the config, or for the total, never by itself: [`stop`] says which holds, and [`left`]
//! caps what one attempt may spend so that a running attempt stops at the limit too.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use crate::domain::time::Timestamp;

/// Days of spending kept: today's is the one a limit reads; the rest is for people.
const DAYS_KEPT: usize = 31;

/// What the agents reported spending, in US dollars.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Spending {
    pub total_usd: f64,
    /// By UTC day, the last [`DAYS_KEPT`].
    #[serde(default)]
    pub days: BTreeMap<NaiveDate, f64>,
}

impl Spending {
    /// Adds what an attempt that ended at `at` cost.
    pub fn add(&mut self, usd: f64, at: &Timestamp) {
        if !(usd.is_finite() && usd > 0.0) {
            return;
        }
        self.total_usd += usd;
        *self.days.entry(at.to_utc().date_naive()).or_insert(0.0) += usd;
        while self.days.len() > DAYS_KEPT {
            self.days.pop_first();
        }
    }

    /// What was spent on the UTC day of `now`.
    pub fn today(&self, now: &Timestamp) -> f64 {
        self.days
            .get(&now.to_utc().date_naive())
            .copied()
            .unwrap_or(0.0)
    }
}

/// The spending limits in US dollars (the config's `budget_usd`, `daily_budget_usd` and
/// `total_budget_usd`); None where there is none.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Limits {
    pub bead: Option<f64>,
    pub daily: Option<f64>,
    pub total: Option<f64>,
}

/// Which limit was reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetScope {
    /// `daily_budget_usd`, for the UTC day.
    Daily,
    /// `total_budget_usd`, over the store's life.
    Total,
}

/// Agent attempts held back because spending reached a limit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BudgetStop {
    pub scope: BudgetScope,
    pub spent_usd: f64,
    pub budget_usd: f64,
    /// When the hold ends by itself: the next UTC midnight for the daily limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Timestamp>,
}

impl BudgetStop {
    /// Why, in words.
    pub fn reason(&self) -> String {
        let what = match self.scope {
            BudgetScope::Daily => "today's spending",
            BudgetScope::Total => "the total spending",
        };
        format!(
            "{what} reached its limit: agents spent ${:.2} of ${:.2}; no agent attempt starts",
            self.spent_usd, self.budget_usd
        )
    }

    /// What a person can do about it.
    pub fn help(&self) -> &'static str {
        match self.scope {
            BudgetScope::Daily => {
                "attempts start again at the next UTC day; to go on today, raise `daily_budget_usd` in the config and `catalyst ctl reload`"
            }
            BudgetScope::Total => {
                "raise `total_budget_usd` in the config (0 for no limit) and `catalyst ctl reload`"
            }
        }
    }
}

/// The limit spending has reached at `now`, the total's first; None while under both.
pub fn stop(limits: &Limits, spending: &Spending, now: &Timestamp) -> Option<BudgetStop> {
    if let Some(budget) = limits.total {
        if spending.total_usd >= budget {
            return Some(BudgetStop {
                scope: BudgetScope::Total,
                spent_usd: spending.total_usd,
                budget_usd: budget,
                until: None,
            });
        }
    }
    let budget = limits.daily?;
    let spent = spending.today(now);
    (spent >= budget).then(|| BudgetStop {
        scope: BudgetScope::Daily,
        spent_usd: spent,
        budget_usd: budget,
        until: Some(next_day(now)),
    })
}

/// What one attempt of a bead that spent `bead_spent` may spend at most: the least of what
/// is left of the bead's budget, today's and the total's; None when no limit is set.
pub fn left(limits: &Limits, spending: &Spending, bead_spent: f64, now: &Timestamp) -> Option<f64> {
    [
        limits.bead.map(|b| b - bead_spent),
        limits.daily.map(|b| b - spending.today(now)),
        limits.total.map(|b| b - spending.total_usd),
    ]
    .into_iter()
    .flatten()
    .reduce(f64::min)
}

/// The UTC midnight after `now`.
fn next_day(now: &Timestamp) -> Timestamp {
    let day = now.to_utc().date_naive();
    let next = day.succ_opt().unwrap_or(day);
    Timestamp::from_utc(next.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        Timestamp::parse(text).expect("timestamp")
    }

    fn config(daily: f64, total: f64) -> Limits {
        let positive = |usd: f64| (usd > 0.0).then_some(usd);
        Limits {
            bead: None,
            daily: positive(daily),
            total: positive(total),
        }
    }

    #[test]
    fn spending_counts_per_utc_day_and_in_total() {
        let mut spending = Spending::default();
        spending.add(1.5, &at("2026-11-28T23:59:00Z"));
        // 00:30 in UTC, though the clock there said the 28th.
        spending.add(2.0, &at("2026-11-28T19:30:00-05:00"));
        spending.add(f64::NAN, &at("2026-11-29T01:00:00Z"));
        spending.add(-3.0, &at("2026-11-29T01:00:00Z"));
        assert_eq!(spending.total_usd, 3.5);
        assert_eq!(spending.today(&at("2026-11-28T12:00:00Z")), 1.5);
        assert_eq!(spending.today(&at("2026-11-29T12:00:00Z")), 2.0);
    }

    #[test]
    fn a_day_over_its_budget_stops_attempts_until_the_next_utc_day() {
        let mut spending = Spending::default();
        let now = at("2026-11-28T15:00:00Z");
        spending.add(4.0, &now);
        assert_eq!(stop(&config(5.0, 0.0), &spending, &now), None);
        spending.add(1.0, &now);
        let stopped = stop(&config(5.0, 0.0), &spending, &now).expect("stopped");
        assert_eq!(stopped.scope, BudgetScope::Daily);
        assert_eq!(stopped.until, Some(at("2026-11-29T00:00:00Z")));
        assert!(
            stopped.reason().contains("$5.00 of $5.00"),
            "{}",
            stopped.reason()
        );
        assert_eq!(
            stop(&config(5.0, 0.0), &spending, &at("2026-11-29T00:00:01Z")),
            None,
            "a new day"
        );
        assert_eq!(stop(&config(0.0, 0.0), &spending, &now), None, "off");
    }

    #[test]
    fn the_total_budget_holds_whatever_the_day() {
        let mut spending = Spending::default();
        spending.add(6.0, &at("2026-11-01T10:00:00Z"));
        let later = at("2026-11-28T10:00:00Z");
        let stopped = stop(&config(100.0, 6.0), &spending, &later).expect("stopped");
        assert_eq!(stopped.scope, BudgetScope::Total);
        assert_eq!(stopped.until, None);
    }

    #[test]
    fn an_attempt_may_spend_the_least_of_what_is_left() {
        let mut spending = Spending::default();
        let now = at("2026-11-28T15:00:00Z");
        spending.add(8.0, &now);
        let limits = Limits {
            bead: Some(10.0),
            ..config(9.0, 100.0)
        };
        assert_eq!(left(&limits, &spending, 2.0, &now), Some(1.0), "today's");
        assert_eq!(left(&limits, &spending, 9.5, &now), Some(0.5), "the bead's");
        assert_eq!(left(&config(0.0, 0.0), &spending, 2.0, &now), None);
    }
}
